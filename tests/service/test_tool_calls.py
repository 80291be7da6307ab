"""Forced tool calls (tool_choice "required" or a named function) on a random-weight tiny model, over HTTP:
a small max_tokens never leaves raw `<tool_call>` tags in `content`, parallel_tool_calls=False gives exactly
one call, and streamed calls arrive as they are generated, in OpenAI's delta shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")

from helpers_server import USER, Served, serve_tiny  # noqa: E402


def tool(name: str, **properties: dict[str, Any]) -> dict[str, Any]:
    """A function tool whose arguments are exactly `properties`, all required."""
    parameters = {"type": "object", "properties": properties, "required": list(properties)}
    parameters["additionalProperties"] = False
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


TOOLS = [
    tool("move", row={"enum": ["A", "B", "C"]}, note={"type": "string", "maxLength": 30}),
    tool("say", text={"type": "string", "maxLength": 30}),
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


@pytest.fixture(scope="module")
def served(tiny_model_path: Path) -> Iterator[Served]:
    s = serve_tiny(tiny_model_path, "tiny", max_model_len=2048, stream_interval=0)  # a chunk per token
    yield s
    s.close()


def _check(choice: Any, *, budget_cut_ok: bool) -> list[Any]:
    """No raw tags; complete calls match their tool's schema; a cut reply says "length"."""
    assert "<tool_call>" not in (choice.message.content or ""), choice.message.content
    assert choice.message.content in (None, "")
    calls = list(choice.message.tool_calls or [])
    if choice.finish_reason == "length":  # the complete calls before the cut (maybe none)
        assert budget_cut_ok
    else:
        assert choice.finish_reason == "tool_calls" and calls
    for call in calls:
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
    return calls


@pytest.mark.parametrize("max_tokens", [8, 30, 60, 120])
def test_required_calls_with_a_small_budget_never_return_raw_tags(served: Served, max_tokens: int) -> None:
    response = served.client.chat.completions.create(
        model="tiny", messages=USER, tools=TOOLS, tool_choice="required", n=16, seed=3, max_tokens=max_tokens
    )
    cut = [c for c in response.choices if c.finish_reason == "length"]
    for choice in response.choices:
        _check(choice, budget_cut_ok=True)
    if max_tokens == 8:
        assert len(cut) == 16  # no call fits 8 tokens: each says "length", none shows its tags
    if max_tokens == 120:  # a random model keeps adding calls: the cut ones keep their complete calls
        assert any(len(c.message.tool_calls or []) >= 2 for c in cut)


@pytest.mark.parametrize("max_tokens", [30, 60, 300])
def test_one_call_when_parallel_calls_are_off(served: Served, max_tokens: int) -> None:
    for tool_choice in ("required", {"type": "function", "function": {"name": "say"}}):
        response = served.client.chat.completions.create(
            model="tiny",
            messages=USER,
            tools=TOOLS,
            tool_choice=tool_choice,  # type: ignore[arg-type]
            parallel_tool_calls=False,
            n=12,
            seed=8,
            max_tokens=max_tokens,
        )
        for choice in response.choices:
            calls = _check(choice, budget_cut_ok=max_tokens < 300)
            assert len(calls) <= 1
            if choice.finish_reason == "tool_calls":
                assert len(calls) == 1


def test_streamed_calls_arrive_as_generated_and_equal_the_whole_reply(served: Served) -> None:
    kwargs: dict[str, Any] = dict(
        model="tiny", messages=USER, tools=TOOLS, tool_choice="required", seed=21, max_tokens=300
    )
    whole = served.client.chat.completions.create(**kwargs).choices[0]
    chunks = list(served.client.chat.completions.create(**kwargs, stream=True))
    calls: dict[int, dict[str, str]] = {}
    with_calls = []
    for n, chunk in enumerate(chunks):
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                with_calls.append(n)
                if delta.id is not None:  # a call starts: its id, type, name (and any arguments so far)
                    assert delta.index == len(calls) and delta.type == "function" and delta.function.name
                    calls[delta.index] = {"name": delta.function.name, "arguments": delta.function.arguments}
                else:  # then its arguments, a piece at a time
                    assert delta.function.name is None
                    calls[delta.index]["arguments"] += delta.function.arguments
            assert (choice.delta.content or "") == ""
    assert [(c["name"], c["arguments"]) for c in calls.values()] == [
        (c.function.name, c.function.arguments) for c in whole.message.tool_calls
    ]
    assert chunks[-1].choices[0].finish_reason == whole.finish_reason
    # as generated: pieces in many chunks, the first long before the reply ends
    assert len(set(with_calls)) >= 5 and with_calls[0] < len(chunks) // 2
