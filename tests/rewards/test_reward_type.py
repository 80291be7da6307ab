"""One reward type: a hand-written function, RULER (against the scripted HTTP judge), a shaping signal and
their combinations are all `art.rewards.Reward`s, scored the same way, and the MCP-RL signal is one."""

from __future__ import annotations

from typing import Any

import pytest
from judge_helpers import group_of

import art
import art.mcp
from art.rewards import Reward, RulerReward, as_reward, reward_fn
from art.trajectories import Trajectory


def answered_seven(trajectory: Trajectory) -> float:
    return 1.0 if "7" in str(trajectory.messages()[-1]["content"]) else 0.0


async def test_a_hand_written_function_is_a_reward() -> None:
    group = group_of("MARK:0.7", "MARK:0.1")
    solved = reward_fn(answered_seven)
    assert isinstance(solved, Reward) and solved(group.trajectories[0]) == 1.0  # still the function
    scored = await solved.score_group(group)
    assert scored is not None and scored is not group
    assert [t.reward for t in scored.trajectories] == [1.0, 0.0]
    assert [t.reward for t in group.trajectories] == [0.0, 0.0]  # the input is untouched


async def test_an_async_function_and_a_lambda_are_rewards_too() -> None:
    async def length(trajectory: Trajectory) -> float:
        return float(len(str(trajectory.messages()[-1]["content"])))

    scored = await (reward_fn(length) + as_reward(lambda t: 1.0)).score_group(group_of("ab", "abcd"))
    assert scored is not None and [t.reward for t in scored.trajectories] == [3.0, 5.0]


async def test_ruler_plus_a_weighted_signal_is_one_reward(make_judge: Any) -> None:
    """What the MCP-RL loop trains on: the judge's score plus a weighted label-free bonus, recorded."""
    group = group_of("MARK:0.9", "MARK:0.1", rewards=[1.0, 0.0])
    for trajectory, (calls, errors) in zip(group.trajectories, [(4, 0), (4, 4)], strict=True):
        trajectory.metrics.update(task_completed=True, tool_calls=calls, tool_errors=errors)
    reward = RulerReward(make_judge(), cache=False) + (0.2 * art.mcp.tool_use_signal).recorded_as("bonus")
    scored = await reward.score_group(group)
    assert scored is not None
    assert [t.metrics["ruler_score"] for t in scored.trajectories] == [0.9, 0.1]
    assert [t.metrics["bonus"] for t in scored.trajectories] == pytest.approx([0.2, 0.1])
    assert [t.reward for t in scored.trajectories] == pytest.approx([1.1, 0.2])
    assert [t.metrics["independent_reward"] for t in scored.trajectories] == [
        1.0,
        0.0,
    ]  # RULER saw the rollout's


async def test_a_group_the_judge_cannot_score_is_dropped_by_the_whole_sum(make_judge: Any) -> None:
    calls: list[int] = []

    def counted(trajectory: Trajectory) -> float:
        calls.append(1)
        return 1.0

    reward = RulerReward(make_judge("garbage"), cache=False, swallow_exceptions=True) + reward_fn(counted)
    assert await reward.score_group(group_of("MARK:0.9", "MARK:0.1")) is None
    assert calls == []  # the terms after a failed one never run


async def test_rewards_combine_as_numbers_do() -> None:
    one, two = as_reward(lambda t: 1.0), as_reward(lambda t: 2.0)
    total = 0.5 * one + two * 3 + one
    scored = await total.score_group(group_of("x"))
    assert scored is not None and scored.trajectories[0].reward == pytest.approx(7.5)
    with pytest.raises(TypeError):
        one + 1.0  # type: ignore[operator]  # a number is not a reward: say `as_reward(lambda t: 1.0)`


def test_ruler_training_config_takes_a_reward_or_a_plain_function() -> None:
    from art.recipes.ruler_loop.loop import RulerTrainingConfig, loop_reward

    for shaping in (0.2 * art.mcp.tool_use_signal, lambda t: 0.2 * art.mcp.tool_use_signal(t)):
        reward = loop_reward("openai/o4-mini", RulerTrainingConfig(shaping=shaping), shaped=True)
        assert isinstance(reward, Reward) and reward.name == "ruler_score + shaping_bonus"
    alone = loop_reward("openai/o4-mini", RulerTrainingConfig(shaping=shaping), shaped=False)
    assert isinstance(alone, RulerReward)
