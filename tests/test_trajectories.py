"""Trajectories: validation of what users build, Choice handling, and awaitable groups."""

from __future__ import annotations

import asyncio
import datetime
import json
import math
from pathlib import Path

import pytest
from helpers_choices import make_choice
from openai.types.chat.chat_completion import Choice

import art


def tool_call(arguments: object) -> dict[str, object]:
    return {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": arguments}}


def test_messages_turns_choices_into_assistant_messages() -> None:
    choice = make_choice(content=None, tool_calls=[tool_call('{"q": "x"}')], finish_reason="tool_calls")
    traj = art.Trajectory(messages_and_choices=[{"role": "user", "content": "hi"}, choice])
    messages = traj.messages()
    assert messages[0] == {"role": "user", "content": "hi"}
    assert messages[1]["role"] == "assistant"
    assert messages[1]["content"] is None
    assert messages[1]["tool_calls"][0]["function"] == {"name": "search", "arguments": '{"q": "x"}'}
    assert traj.num_trainable_turns() == 1


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_reward_is_refused_at_build_and_assignment(bad: float) -> None:
    with pytest.raises(ValueError, match="reward"):
        art.Trajectory(messages_and_choices=[], reward=bad)
    traj = art.Trajectory(messages_and_choices=[])
    with pytest.raises(ValueError, match="reward"):
        traj.reward = bad
    assert traj.reward == 0.0


def test_unknown_role_is_refused_with_the_field_named() -> None:
    with pytest.raises(ValueError, match=r"messages_and_choices\[1\]\.role: unknown role 'bot'"):
        art.Trajectory(
            messages_and_choices=[{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}]
        )


@pytest.mark.parametrize("arguments", [{"q": "x"}, 3])
def test_tool_call_arguments_must_be_a_string(arguments: object) -> None:
    message = {"role": "assistant", "content": None, "tool_calls": [tool_call(arguments)]}
    with pytest.raises(ValueError, match=r"messages_and_choices\[0\]\.tool_calls\[0\]\.function\.arguments"):
        art.Trajectory(messages_and_choices=[message])


def test_tool_call_arguments_that_are_not_json_are_kept_as_the_reference_keeps_them(tmp_path: Path) -> None:
    """A model's malformed call is part of what it did: kept, logged and read back as written."""
    message = {"role": "assistant", "content": None, "tool_calls": [tool_call("not json {")]}
    traj = art.Trajectory(messages_and_choices=[{"role": "user", "content": "q"}, message], reward=1.0)
    traj.validate_for_record()
    model = art.Model(name="m", project="p", base_path=str(tmp_path))
    asyncio.run(model.log([art.TrajectoryGroup([traj])], split="val"))
    back = model.storage.read_groups("val", 0)[0].trajectories[0]
    assert back.messages()[1]["tool_calls"][0]["function"]["arguments"] == "not json {"


def test_validate_for_record_catches_what_was_appended_later() -> None:
    traj = art.Trajectory(messages_and_choices=[{"role": "user", "content": "a"}])
    traj.messages_and_choices.append({"role": "robot", "content": "b"})
    with pytest.raises(ValueError, match="unknown role 'robot'"):
        traj.validate_for_record()


def test_serialisation_is_lossless() -> None:
    choice = make_choice(token_ids=[11, 12, 13], logprobs=[-0.1, -0.2, -0.3], checkpoint_step=4)
    traj = art.Trajectory(
        messages_and_choices=[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, choice],
        tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        additional_histories=[art.History(messages_and_choices=[{"role": "user", "content": "x"}, choice])],
        reward=0.75,
        metrics={"win": True, "moves": 3, "score": 0.5},
        metadata={"seed": 7, "name": "game", "none": None},
        logs=["line"],
    )
    back = art.Trajectory.model_validate_json(traj.model_dump_json())
    assert back == traj
    restored = back.messages_and_choices[2]
    assert isinstance(restored, Choice)
    assert restored.model_extra is not None
    assert restored.model_extra["token_ids"] == [11, 12, 13]
    assert restored.model_extra["checkpoint_step"] == 4
    assert restored.logprobs is not None
    assert [c.logprob for c in restored.logprobs.content or []] == [-0.1, -0.2, -0.3]
    assert isinstance(back.additional_histories[0].messages_and_choices[1], Choice)


def test_for_logging_marks_sampled_turns_and_dumps_as_yaml_ready_dicts() -> None:
    """The reference's examples print `yaml.dump(traj.for_logging())`: plain dicts, trainable turns marked."""
    choice = make_choice(content="4")
    traj = art.Trajectory(
        messages_and_choices=[{"role": "user", "content": "2 + 2?"}, choice],
        reward=1.0,
        metrics={"correct": True},
        metadata={"scenario": 3},
        logs=["asked"],
    )
    traj.additional_histories.append(art.History(messages_and_choices=[{"role": "user", "content": "again"}]))
    logged = traj.for_logging()
    assert logged["messages"] == [
        {"role": "user", "content": "2 + 2?", "trainable": False},
        {"role": "assistant", "content": "4", "trainable": True},
    ]
    assert (logged["reward"], logged["metrics"], logged["metadata"], logged["logs"]) == (
        1.0, {"correct": True}, {"scenario": 3}, ["asked"],
    )  # fmt: skip
    assert logged["additional_histories"] == [
        {"messages": [{"role": "user", "content": "again", "trainable": False}], "tools": None}
    ]
    assert json.loads(json.dumps(logged)) == logged  # nothing but JSON types
    assert traj.messages_and_choices[1] is choice  # logging changed nothing


def test_start_time_is_when_the_trajectory_was_made_and_is_not_saved() -> None:
    before = datetime.datetime.now()
    traj = art.Trajectory(reward=0.0)
    assert before <= traj.start_time <= datetime.datetime.now()
    assert "start_time" not in traj.model_dump()
    assert art.Trajectory.model_validate(traj.model_dump(mode="json")) == traj


async def test_group_of_awaitables_collects_rollout_exceptions() -> None:
    async def ok(r: float) -> art.Trajectory:
        return art.Trajectory(messages_and_choices=[], reward=r)

    async def boom() -> art.Trajectory:
        raise KeyError("missing")

    group = art.TrajectoryGroup([ok(1.0), boom(), ok(0.0)])
    assert group.num_pending == 3
    done = await group
    assert done is group
    assert sorted(t.reward for t in done) == [0.0, 1.0]
    assert len(done.exceptions) == 1
    assert done.exceptions[0].type == "KeyError"
    assert "missing" in done.exceptions[0].traceback


def test_group_refuses_things_that_are_not_trajectories() -> None:
    with pytest.raises(TypeError, match=r"trajectories\[0\]"):
        art.TrajectoryGroup(["not a trajectory"])  # type: ignore[list-item]
