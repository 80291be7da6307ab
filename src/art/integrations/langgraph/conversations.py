"""Logged LLM calls -> one `Trajectory`: the main conversation plus the ones that diverged from it.

An agent's calls usually form one growing conversation: each request repeats the previous request's
messages, the reply it got, and what came after (tool results, a new user turn). A call *extends* a
conversation when that conversation is a prefix of the call's request; the reply is appended as the
sampled `Choice` (token ids and logprobs: trainable), and the earlier turns keep their own Choices, so the
whole thread is trainable, not just the last reply. A call that extends no conversation (a sub-agent with
its own prompt, a structured-output call on a rewritten prompt, a retry from an earlier state) starts a
new one. The conversation of the first call is the trajectory's main thread; the others become
`additional_histories`, in the order they started.

Messages are compared as the model sees them: role, text (a list of text parts counts as its joined text,
None as ""), tool calls by name and parsed arguments, and the id a tool result answers. So a reply that
LangChain re-serialises (None content sent back as "", arguments re-dumped with other spacing) still
matches the Choice it came from.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from openai.types.chat.chat_completion import Choice

from art.integrations.langgraph.call_log import LoggedCall
from art.trajectories import History, MessageOrChoice, Tools, Trajectory, choice_to_message

_Key = tuple[Any, ...]


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return str(content)


def _arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return str(arguments)
    return json.dumps(arguments, sort_keys=True)


def message_key(message: dict[str, Any]) -> _Key:
    """What identifies a message for prefix matching (see the module docstring)."""
    calls = tuple(
        (
            str((call.get("function") or {}).get("name")),
            _arguments((call.get("function") or {}).get("arguments")),
        )
        for call in message.get("tool_calls") or []
    )
    return (message.get("role"), _text(message.get("content")), calls, message.get("tool_call_id"))


@dataclass
class _Conversation:
    items: list[MessageOrChoice] = field(default_factory=list)
    keys: list[_Key] = field(default_factory=list)
    tools: Tools | None = None


def _extends(conversation: _Conversation, keys: list[_Key]) -> bool:
    n = len(conversation.keys)
    return n <= len(keys) and conversation.keys == keys[:n]


def conversations_from_calls(calls: list[LoggedCall]) -> list[tuple[list[MessageOrChoice], Tools | None]]:
    """Group the successful calls into conversations: (messages and choices, tools), first call's first."""
    conversations: list[_Conversation] = []
    for call in calls:
        if not call.ok:
            continue
        assert call.response is not None
        messages = [copy.deepcopy(m) for m in call.request.get("messages") or []]
        keys = [message_key(m) for m in messages]
        choice = Choice.model_validate(call.response["choices"][0])
        candidates = [c for c in conversations if _extends(c, keys)]
        if candidates:
            conversation = max(candidates, key=lambda c: len(c.keys))
            conversation.items.extend(messages[len(conversation.keys) :])
        else:
            conversation = _Conversation(items=list(messages))
            conversations.append(conversation)
        conversation.items.append(choice)
        conversation.keys = [*keys, message_key(choice_to_message(choice))]
        conversation.tools = call.request.get("tools") or None
    return [(c.items, c.tools) for c in conversations]


def fill_trajectory(trajectory: Trajectory, calls: list[LoggedCall]) -> Trajectory:
    """Put the calls' conversations into `trajectory` (in place; also returned).

    The main conversation replaces `messages_and_choices` and `tools`; the others are appended to
    `additional_histories`. With no successful call the trajectory is left as it is, with a line in its
    logs saying so.
    """
    conversations = conversations_from_calls(calls)
    if not conversations:
        trajectory.log(f"art.langgraph: no LLM call was captured ({len(calls)} failed)")
        return trajectory
    (main, main_tools), rest = conversations[0], conversations[1:]
    trajectory.messages_and_choices = main
    trajectory.tools = main_tools
    trajectory.additional_histories = [
        *trajectory.additional_histories,
        *(History(messages_and_choices=items, tools=tools) for items, tools in rest),
    ]
    return trajectory
