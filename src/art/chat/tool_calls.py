"""Parsing Hermes/Qwen-style tool calls out of generated text.

A reply may hold any number of `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks; the last
one may lack its closing tag (generation often stops at the end-of-turn token right after the JSON).
`parse_tool_calls` returns the content before the first block (right-stripped, None when empty: exactly
what the chat template writes before a call when it re-renders the turn) and the calls, with ids
"call_<24 hex>" and arguments as a JSON string. Anything unparseable (bad JSON, no name, non-object
arguments) means no calls at all: the whole text stays content, and the caller keeps finish_reason "stop".
Text between or after the blocks is dropped, as vLLM's Hermes parser does.

`ToolCallStreamer` does the same while streaming: content before the first `<tool_call>` is passed through
as it arrives (holding back a possible partial tag and trailing whitespace), everything after it is held
until the end, then parsed as a whole. The streamed content and calls equal the non-streamed ones.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
_BLOCK = re.compile(re.escape(OPEN_TAG) + r"(.*?)(?:" + re.escape(CLOSE_TAG) + r"|\Z)", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    """One parsed call: `arguments` is a JSON string."""

    id: str
    name: str
    arguments: str

    def to_openai(self, index: int | None = None) -> dict[str, object]:
        """The call in OpenAI's `message.tool_calls` (or, with `index`, streaming delta) shape."""
        out: dict[str, object] = {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }
        if index is not None:
            out = {"index": index, **out}
        return out


def new_call_id() -> str:
    """An OpenAI-style tool call id."""
    return "call_" + secrets.token_hex(12)


def _parse_block(body: str) -> ToolCall | None:
    try:
        data = json.loads(body.strip())
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        return None
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError:
            return None
        arguments = parsed
    if not isinstance(arguments, dict):
        return None
    return ToolCall(new_call_id(), data["name"], json.dumps(arguments, ensure_ascii=False))


def parse_tool_calls(text: str) -> tuple[str | None, list[ToolCall]]:
    """(content, calls) from a generated reply; calls is empty when there are none or any is malformed."""
    start = text.find(OPEN_TAG)
    if start < 0:
        return (text or None), []
    calls = []
    for match in _BLOCK.finditer(text, start):
        call = _parse_block(match.group(1))
        if call is None:
            return (text or None), []
        calls.append(call)
    return (text[:start].rstrip() or None), calls


class ToolCallStreamer:
    """Streaming counterpart of `parse_tool_calls` (see the module docstring)."""

    def __init__(self) -> None:
        self._text = ""
        self._emitted = 0
        self._in_call = False

    def push(self, delta: str) -> str:
        """Add generated text; returns the content that can be sent now."""
        self._text += delta
        if self._in_call:
            return ""
        start = self._text.find(OPEN_TAG)
        if start >= 0:
            self._in_call = True
            safe = len(self._text[:start].rstrip())
        else:
            safe = len(self._text)
            for k in range(min(len(OPEN_TAG) - 1, len(self._text)), 0, -1):  # a partial tag at the end
                if OPEN_TAG.startswith(self._text[-k:]):
                    safe -= k
                    break
            safe = len(self._text[:safe].rstrip())
        out = self._text[self._emitted : max(safe, self._emitted)]
        self._emitted = max(safe, self._emitted)
        return out

    def finish(self) -> tuple[str, list[ToolCall]]:
        """(remaining content, parsed calls) once the text is complete."""
        content, calls = parse_tool_calls(self._text)
        content = content or ""
        rest = content[self._emitted :] if content.startswith(self._text[: self._emitted]) else ""
        return rest, calls
