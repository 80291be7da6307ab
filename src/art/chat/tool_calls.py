"""Parsing Hermes/Qwen-style tool calls out of generated text, whole or as it streams.

A reply may hold any number of `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks; the last
one may lack its closing tag (generation often stops at the end-of-turn token right after the JSON).
`parse_tool_calls` returns the content before the first block (right-stripped, None when empty: exactly
what the chat template writes before a call when it re-renders the turn) and the calls, with ids
"call_<24 hex>" and `arguments` the JSON text of the arguments object as the model wrote it (a string
holding JSON, as some models write, is unwrapped). Text between or after the blocks is dropped, as vLLM's
Hermes parser does.

Blocks are read in order. A malformed block (bad JSON, no name, non-object arguments) before any call
means no calls at all: the whole text stays content, and the caller keeps finish_reason "stop"; after
calls it ends them (it and what follows are dropped). A reply cut by max_tokens (`cut=True`) never shows
its raw tags: its complete calls are returned, and a last block cut before its end is left out (its
arguments are not JSON: no tool could run it, no trajectory could record it); finish_reason stays "length".

`ToolCallStreamer` is the same parser fed piece by piece; `parse_tool_calls` runs it on the whole text, so
streamed and non-streamed replies agree by construction. Content before the first `<tool_call>` is passed
through as it arrives (holding back a possible partial tag and trailing whitespace). Calls go out as OpenAI
streams them (`delta.tool_calls`: first `{index, id, type, function: {name, arguments: ""}}`, then
`{index, function: {arguments: <more>}}`):
- `fine=True` (the reply is constrained by a tool-call grammar, so every call is well formed): the name
  as soon as it is written, then the arguments as they are generated. Only here can the stream hold more
  than the reply: the start of a last call that max_tokens (or a stop string) then cut, as OpenAI's
  stream of a cut call does, while the reply holds the complete calls;
- `fine=False` (free text, which may turn out malformed): each call whole, as soon as its block is closed.
`max_calls=1` (parallel_tool_calls false) keeps only the first call.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
_ARGUMENT_KEYS = ("arguments", "parameters")
_WS = " \t\r\n"


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


class _Incomplete(Exception):
    """The text ends inside a JSON value."""


class _Malformed(Exception):
    """The text is not a JSON object of the expected shape."""


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _end_of_string(text: str, i: int) -> int:
    """Index after the JSON string starting at text[i] == '"'."""
    i += 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        else:
            i += 1
    raise _Incomplete


def _end_of_value(text: str, i: int) -> int:
    """Index after the JSON value starting at text[i] (its syntax is checked only loosely)."""
    if i >= len(text):
        raise _Incomplete
    if text[i] == '"':
        return _end_of_string(text, i)
    if text[i] in "{[":
        depth = 0
        while i < len(text):
            c = text[i]
            if c == '"':
                i = _end_of_string(text, i)
                continue
            if c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        raise _Incomplete
    start = i
    while i < len(text) and text[i] not in _WS + ",}]":
        i += 1
    if i == len(text):
        raise _Incomplete  # a number or literal may go on
    if i == start:
        raise _Malformed
    return i


@dataclass
class _Block:
    """What one call block's JSON says so far (`text` is everything after its `<tool_call>`)."""

    name: str | None = None
    args_start: int | None = None  # where the arguments value begins in the text
    args_end: int | None = None  # where it ends, once it has
    end: int | None = None  # index after the closing brace of the object, once written


def _scan(text: str) -> _Block:
    """Read a call object's keys as far as `text` goes; raises _Malformed for what cannot become one."""
    block = _Block()
    i = _skip_ws(text, 0)
    if i == len(text):
        return block
    if text[i] != "{":
        raise _Malformed
    i += 1
    try:
        while True:
            i = _skip_ws(text, i)
            if i == len(text):
                raise _Incomplete
            if text[i] == "}":
                block.end = i + 1
                return block
            if text[i] != '"':
                raise _Malformed
            key_end = _end_of_string(text, i)
            key = json.loads(text[i:key_end])
            i = _skip_ws(text, key_end)
            if i == len(text):
                raise _Incomplete
            if text[i] != ":":
                raise _Malformed
            start = _skip_ws(text, i + 1)
            if key in _ARGUMENT_KEYS and block.args_start is None and start < len(text):
                block.args_start = start
            end = _end_of_value(text, start)
            if key in _ARGUMENT_KEYS and block.args_start == start:
                block.args_end = end
            if key == "name":
                value = json.loads(text[start:end])
                if not isinstance(value, str) or not value:
                    raise _Malformed
                block.name = value
            i = _skip_ws(text, end)
            if i == len(text):
                raise _Incomplete
            if text[i] == ",":
                i += 1
            elif text[i] != "}":
                raise _Malformed
    except _Incomplete:
        return block
    except ValueError:
        raise _Malformed from None


def _arguments(text: str, block: _Block) -> str | None:
    """The JSON text of a complete block's arguments, or None when the block is not a valid call."""
    try:
        data = json.loads(text[: block.end])
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        return None
    if block.args_start is None:
        return "{}"
    value = data.get("arguments", data.get("parameters"))
    if isinstance(value, str):  # arguments written as a string holding JSON
        try:
            value = json.loads(value)
        except ValueError:
            return None
        return json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else None
    return text[block.args_start : block.args_end] if isinstance(value, dict) else None


@dataclass
class _Call:
    id: str
    name: str
    arguments: str = ""
    complete: bool = False  # its block ended well formed (only complete calls are in the reply)


@dataclass
class ToolCallStreamer:
    """The parser, fed as text is generated (see the module docstring)."""

    fine: bool = False
    max_calls: int | None = None
    _text: str = ""
    _emitted: int = 0  # content characters already returned
    _state: str = "content"  # content | call (inside a block) | between (after one) | failed | done
    _block_start: int = 0  # where the current block's JSON starts in _text
    _calls: list[_Call] = field(default_factory=list)
    _sent_args: int = 0  # characters of the current call's arguments already sent (fine mode)
    _open: bool = False  # fine mode: the current block's call was announced

    def push(self, delta: str) -> tuple[str, list[dict[str, Any]]]:
        """Add generated text; returns (content that can be sent now, tool call deltas to send now)."""
        self._text += delta
        out: list[dict[str, Any]] = []
        content = ""
        while True:
            if self._state == "content":
                start = self._text.find(OPEN_TAG)
                if start < 0:
                    content += self._release_content(final=False)
                    return content, out
                content += self._release(len(self._text[:start].rstrip()))
                self._enter_block(start + len(OPEN_TAG))
            elif self._state == "between":
                start = self._text.find(OPEN_TAG, self._block_start)
                if start < 0:
                    return content, out
                self._enter_block(start + len(OPEN_TAG))
            elif self._state == "call":
                close = self._text.find(CLOSE_TAG, self._block_start)
                body = self._text[self._block_start : close if close >= 0 else len(self._text)]
                if close < 0:
                    if self.fine:
                        out += self._stream_fine(body)
                    return content, out
                out += self._close_block(body, cut=False)
                if self._state == "call":
                    self._state = "between"
                self._block_start = close + len(CLOSE_TAG)
            else:  # failed (held to the end as content) or done (the rest is dropped)
                return content, out

    def finish(self, *, cut: bool = False) -> tuple[str, list[dict[str, Any]], list[ToolCall]]:
        """Once the text is complete (`cut`: by max_tokens): (remaining content, the last call deltas,
        every call)."""
        out: list[dict[str, Any]] = []
        if self._state == "content":
            rest = self._release_content(final=True)
        elif self._state == "failed":
            rest = self._text[self._emitted :]
        else:
            rest = ""
            if self._state == "call":
                out = self._close_block(self._text[self._block_start :], cut=cut, last=True)
                if self._state == "failed":
                    rest = self._text[self._emitted :]
        calls = [ToolCall(c.id, c.name, c.arguments) for c in self._calls if c.complete]
        return rest, out, calls

    # ---- content --------------------------------------------------------------------------------------
    def _release(self, upto: int) -> str:
        out = self._text[self._emitted : max(upto, self._emitted)]
        self._emitted = max(upto, self._emitted)
        return out

    def _release_content(self, final: bool) -> str:
        safe = len(self._text)
        if not final:
            for k in range(min(len(OPEN_TAG) - 1, len(self._text)), 0, -1):  # a partial tag at the end
                if OPEN_TAG.startswith(self._text[-k:]):
                    safe -= k
                    break
            safe = len(self._text[:safe].rstrip())
        return self._release(safe)

    # ---- calls ----------------------------------------------------------------------------------------
    def _enter_block(self, body_start: int) -> None:
        if self.max_calls is not None and len(self._calls) >= self.max_calls:
            self._state = "done"
            return
        self._state, self._block_start, self._sent_args, self._open = "call", body_start, 0, False

    def _stream_fine(self, body: str) -> list[dict[str, Any]]:
        """Fine mode: announce the call once its name is written, then send its arguments as they grow."""
        try:
            block = _scan(body)
        except _Malformed:
            return []  # (not under a grammar; the block's end decides)
        return self._announce(body, block, upto=None)

    def _announce(self, body: str, block: _Block, upto: int | None) -> list[dict[str, Any]]:
        """Deltas that bring the current call up to `upto` characters of arguments (None: all written)."""
        out: list[dict[str, Any]] = []
        if block.name is None:
            return out
        index = len(self._calls) - (1 if self._open else 0)
        if not self._open:
            self._calls.append(_Call(new_call_id(), block.name))
            self._open = True
            out.append(_call_delta(index, self._calls[-1]))
        call = self._calls[-1]
        if block.args_start is not None:
            end = block.args_end if block.args_end is not None else len(body)
            arguments = body[block.args_start : end] if upto is None else body[block.args_start : end][:upto]
            if len(arguments) > self._sent_args and arguments.startswith(call.arguments):
                out.append({"index": index, "function": {"arguments": arguments[self._sent_args :]}})
                call.arguments = arguments
                self._sent_args = len(arguments)
        return out

    def _close_block(self, body: str, *, cut: bool, last: bool = False) -> list[dict[str, Any]]:
        """The block's text is complete (closed, or the reply ended): its call, or the parse ends."""
        try:
            block = _scan(body)
        except _Malformed:
            block = None
        arguments = _arguments(body, block) if block is not None and block.end is not None else None
        if arguments is None and last and cut:  # cut short by max_tokens: what was written, no raw tags
            return self._partial(body, block)
        if arguments is None:
            return self._malformed()
        assert block is not None and block.name is not None
        if self._open:  # fine mode: the call is out already; send what its arguments still lack
            call = self._calls[-1]
            out = []
            if arguments != call.arguments and arguments.startswith(call.arguments):
                out.append(
                    {
                        "index": len(self._calls) - 1,
                        "function": {"arguments": arguments[len(call.arguments) :]},
                    }
                )
                call.arguments = arguments
            call.complete, self._open = True, False
            return out
        self._calls.append(_Call(new_call_id(), block.name, arguments, complete=True))
        delta = _call_delta(len(self._calls) - 1, self._calls[-1])
        return [delta]

    def _partial(self, body: str, block: _Block | None) -> list[dict[str, Any]]:
        """A last call cut by max_tokens: not in the reply (its arguments are not JSON); in fine mode its
        pieces written so far still go out, as OpenAI streams a cut call."""
        out = self._announce(body, block, upto=None) if self.fine and block is not None else []
        self._state, self._open = "done", False
        return out

    def _malformed(self) -> list[dict[str, Any]]:
        if self._calls:
            self._state = "done"  # after calls, a malformed block ends them
        else:
            self._state = "failed"  # before any: no calls, the whole text is content
        self._open = False
        return []


def _call_delta(index: int, call: _Call) -> dict[str, Any]:
    return {
        "index": index,
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def merge_call_deltas(deltas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Deltas of one chunk with each call's pieces joined (a call's start and its arguments so far).

    Example:
        >>> merge_call_deltas([{"index": 0, "id": "c", "type": "function", "function": {"name": "f", "arguments": ""}},
        ...                    {"index": 0, "function": {"arguments": '{"a": '}}, {"index": 0, "function": {"arguments": "1}"}}])
        [{'index': 0, 'id': 'c', 'type': 'function', 'function': {'name': 'f', 'arguments': '{"a": 1}'}}]
    """
    merged: list[dict[str, Any]] = []
    for delta in deltas:
        if merged and merged[-1]["index"] == delta["index"] and "id" not in delta:
            function = merged[-1]["function"]
            function["arguments"] = function.get("arguments", "") + delta["function"]["arguments"]
        else:
            merged.append({**delta, "function": dict(delta["function"])})
    return merged


def parse_tool_calls(text: str, *, cut: bool = False) -> tuple[str | None, list[ToolCall]]:
    """(content, calls) from a generated reply (`cut`: it was cut by max_tokens); see the module docstring.

    Example:
        >>> content, calls = parse_tool_calls('Sure.\\n<tool_call>\\n{"name": "add", "arguments": {"a": 1}}\\n</tool_call>')
        >>> content, calls[0].name, calls[0].arguments
        ('Sure.', 'add', '{"a": 1}')
    """
    streamer = ToolCallStreamer()
    content, _ = streamer.push(text)
    rest, _, calls = streamer.finish(cut=cut)
    return (content + rest) or None, calls
