"""Logged calls -> trajectory: conversations that extend each other merge, diverging ones become histories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers_choices import make_choice
from openai.types.chat.chat_completion import Choice

import art
from art.integrations.langgraph.call_log import CallLog, LoggedCall, read_call_log
from art.integrations.langgraph.conversations import conversations_from_calls, fill_trajectory
from art.trajectories import choice_to_message

SYSTEM = {"role": "system", "content": "You add numbers."}
USER = {"role": "user", "content": "What is 2+3?"}
TOOLS = [
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}
]


def call(messages: list[dict[str, Any]], choice: Choice, tools: Any = TOOLS) -> LoggedCall:
    request: dict[str, Any] = {"model": "m@0", "messages": messages}
    if tools:
        request["tools"] = tools
    return LoggedCall(
        request=request,
        response={"id": "x", "object": "chat.completion", "choices": [choice.model_dump(mode="json")]},
        status_code=200,
    )


def tool_call_choice(arguments: str, token_ids: list[int]) -> Choice:
    return make_choice(
        content=None,
        token_ids=token_ids,
        tool_calls=[
            {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": arguments}}
        ],
        finish_reason="tool_calls",
    )


def test_a_growing_conversation_keeps_every_sampled_turn_as_a_choice() -> None:
    first = tool_call_choice('{"a":2,"b":3}', [11, 12])
    # LangChain sends the assistant turn back re-serialised: content "" and arguments re-dumped.
    echoed = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
        ],
    }
    result = {"role": "tool", "content": "5", "tool_call_id": "call_1"}
    final = make_choice("It is 5.", token_ids=[21, 22, 23])
    calls = [call([SYSTEM, USER], first), call([SYSTEM, USER, echoed, result], final)]

    trajectory = fill_trajectory(art.Trajectory(messages_and_choices=[], reward=1.0), calls)

    items = trajectory.messages_and_choices
    assert items[0] == SYSTEM and items[1] == USER
    assert isinstance(items[2], Choice) and items[2].token_ids == [11, 12]  # type: ignore[attr-defined]
    assert items[3] == result
    assert isinstance(items[4], Choice) and items[4].token_ids == [21, 22, 23]  # type: ignore[attr-defined]
    assert len(items) == 5
    assert trajectory.num_trainable_turns() == 2
    assert trajectory.tools == TOOLS
    assert trajectory.additional_histories == []
    assert trajectory.reward == 1.0


def test_a_call_from_another_prompt_becomes_an_additional_history() -> None:
    main_reply = make_choice("main", token_ids=[1])
    sub_prompt = [
        {"role": "system", "content": "You are a critic."},
        {"role": "user", "content": "Judge it."},
    ]
    sub_reply = make_choice("sub", token_ids=[2])
    later_main = make_choice("main again", token_ids=[3])
    calls = [
        call([SYSTEM, USER], main_reply),
        call(sub_prompt, sub_reply, tools=None),
        call([SYSTEM, USER, choice_to_message(main_reply), {"role": "user", "content": "More?"}], later_main),
    ]

    trajectory = fill_trajectory(art.Trajectory(messages_and_choices=[]), calls)

    assert [m["content"] for m in trajectory.messages()] == [
        "You add numbers.",
        "What is 2+3?",
        "main",
        "More?",
        "main again",
    ]
    assert len(trajectory.additional_histories) == 1
    history = trajectory.additional_histories[0]
    assert [m["content"] for m in history.messages()] == ["You are a critic.", "Judge it.", "sub"]
    assert history.tools is None
    assert trajectory.num_trainable_turns() == 3


def test_two_replies_to_the_same_state_diverge() -> None:
    calls = [
        call([SYSTEM, USER], make_choice("a", token_ids=[1])),
        call([SYSTEM, USER], make_choice("b", token_ids=[2])),
    ]
    conversations = conversations_from_calls(calls)
    assert len(conversations) == 2
    assert [c[0][-1].message.content for c in conversations] == ["a", "b"]  # type: ignore[union-attr]


def test_failed_calls_are_skipped_and_an_empty_log_leaves_the_trajectory_alone() -> None:
    failed = LoggedCall(request={"messages": [USER]}, status_code=400, error="bad request")
    trajectory = art.Trajectory(messages_and_choices=[USER], reward=0.5)
    fill_trajectory(trajectory, [failed])
    assert trajectory.messages_and_choices == [USER]
    assert "no LLM call was captured (1 failed)" in trajectory.logs[-1]


def test_the_call_log_is_json_lines_and_survives_a_torn_last_line(tmp_path: Path) -> None:
    log = CallLog(path=tmp_path / "calls.jsonl")
    log.append(call([SYSTEM, USER], make_choice("a", token_ids=[1, 2])))
    with open(log.path, "a") as f:
        f.write('{"request": {"mess')  # a crash mid-write
    lines = log.path.read_text().splitlines()
    assert json.loads(lines[0])["response"]["choices"][0]["token_ids"] == [1, 2]
    with pytest.warns(UserWarning, match="line 2"):
        calls = read_call_log(log.path)
    assert len(calls) == 1 and calls[0].ok
