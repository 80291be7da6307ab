"""Text from tokens: incremental decoding, stop strings, token bytes, and Hermes tool-call parsing."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from art.chat.detokenize import TextStream, TokenTable
from art.chat.tool_calls import ToolCallStreamer, parse_tool_calls


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_path)


def _stream(tokenizer: Any, ids: list[int], stop: list[str], chunk: int) -> tuple[str, bool]:
    stream = TextStream(tokenizer, stop)
    text = ""
    for i in range(0, len(ids), chunk):
        text += stream.push(ids[i : i + chunk])
        if stream.stopped:
            break
    return text + stream.finish(), stream.stopped


@pytest.mark.parametrize("text", ["Hello world, the quick brown fox.", "naïve café ✓ 数字 7", "a\nb\n\n  c"])
def test_incremental_text_equals_full_decode(tokenizer: Any, text: str) -> None:
    ids = tokenizer.encode(text, add_special_tokens=False)
    for chunk in (1, 2, 5):
        assert _stream(tokenizer, ids, [], chunk) == (tokenizer.decode(ids), False)


def test_stop_strings_cut_the_text_whatever_the_chunking(tokenizer: Any) -> None:
    ids = tokenizer.encode("The answer is 42. STOP here and more", add_special_tokens=False)
    for chunk in (1, 3, 100):
        assert _stream(tokenizer, ids, ["STOP", "never"], chunk) == ("The answer is 42. ", True)
    assert _stream(tokenizer, ids, ["zzz"], 1) == (tokenizer.decode(ids), False)


def test_stop_string_text_is_never_streamed(tokenizer: Any) -> None:
    ids = tokenizer.encode("abc<END>def", add_special_tokens=False)
    stream = TextStream(tokenizer, ["<END>"])
    shown = [stream.push([t]) for t in ids]
    assert "".join(shown) + stream.finish() == "abc"
    assert all("<" not in s for s in shown)


def test_token_table_gives_text_and_bytes(tokenizer: Any) -> None:
    table = TokenTable(tokenizer)
    ids = tokenizer.encode("héllo world", add_special_tokens=False)
    assert b"".join(bytes(table.get(t)[1]) for t in ids).decode() == "héllo world"
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert table.get(im_end)[0] == "<|im_end|>"


CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'


def test_parse_single_and_multiple_calls() -> None:
    content, calls = parse_tool_calls(CALL)
    assert content is None and len(calls) == 1
    assert calls[0].name == "add" and json.loads(calls[0].arguments) == {"a": 1, "b": 2}
    assert calls[0].id.startswith("call_")
    content, calls = parse_tool_calls("Let me add.\n" + CALL + "\n" + CALL.replace("add", "mul"))
    assert content == "Let me add." and [c.name for c in calls] == ["add", "mul"]
    assert calls[0].id != calls[1].id
    _, calls = parse_tool_calls('<tool_call>{"name": "f", "arguments": {}}')  # unclosed at end of turn
    assert [c.name for c in calls] == ["f"]


@pytest.mark.parametrize(
    "text",
    [
        "no calls here",
        '<tool_call>{"name": "add", "arguments": {"a": </tool_call>',
        '<tool_call>{"arguments": {}}</tool_call>',
        '<tool_call>["add"]</tool_call>',
        "<tool_call>",
        "",
    ],
)
def test_unparseable_text_stays_content(text: str) -> None:
    content, calls = parse_tool_calls(text)
    assert calls == [] and content == (text or None)


def test_a_malformed_block_after_calls_ends_them() -> None:
    # The first call may already have been streamed: it stays; the malformed block and the rest are dropped.
    content, calls = parse_tool_calls(CALL + '<tool_call>{"name": "x", "arguments": 3}</tool_call>' + CALL)
    assert content is None and [c.name for c in calls] == ["add"]


def test_a_reply_cut_inside_a_call_keeps_its_complete_calls_and_no_tags() -> None:
    second = '<tool_call>\n{"name": "mul", "arguments": {"a": 4'
    content, calls = parse_tool_calls(CALL + "\n" + second, cut=True)
    assert content is None  # not the raw text of the cut call
    assert [(c.name, c.arguments) for c in calls] == [("add", '{"a": 1, "b": 2}')]
    content, calls = parse_tool_calls("Sure.\n" + CALL + '\n<tool_call>\n{"na', cut=True)
    assert content == "Sure." and [c.name for c in calls] == ["add"]
    assert parse_tool_calls(second, cut=True) == (None, [])
    # the same text, not cut (the model ended its turn there): malformed, so all of it is content
    assert parse_tool_calls(second) == (second, [])


def feed(streamer: ToolCallStreamer, text: str, seed: int) -> tuple[str, list[dict[str, object]], int]:
    """Push `text` in random pieces; (content, call deltas, pushes that returned call deltas)."""
    rng = random.Random(seed)
    content, deltas, with_calls, i = "", [], 0, 0
    while i < len(text):
        step = rng.randint(1, 6)
        piece, calls = streamer.push(text[i : i + step])
        content, deltas, with_calls = content + piece, deltas + calls, with_calls + bool(calls)
        i += step
    return content, deltas, with_calls


def rebuilt(deltas: list[dict[str, object]]) -> list[tuple[str, str]]:
    """(name, arguments) of each call, put together from its deltas as an OpenAI client does."""
    calls: dict[int, list[str]] = {}
    for delta in deltas:
        function = delta["function"]
        assert isinstance(function, dict) and isinstance(delta["index"], int)
        if "id" in delta:
            assert delta["index"] == len(calls) and delta["type"] == "function"
            calls[delta["index"]] = [function["name"], function["arguments"]]
        else:
            assert set(function) == {"arguments"}
            calls[delta["index"]][1] += function["arguments"]
    return [(name, arguments) for name, arguments in calls.values()]


@pytest.mark.parametrize(
    "text",
    [
        "plain text  \n",
        "Sure.\n\n" + CALL,
        CALL + "\n" + CALL,
        "x <tool_call>{bad</tool_call>",
        "a <tool_ca",
        "<tool",
        CALL + "\n" + CALL.replace("add", "mul")[:-20],
    ],
)
@pytest.mark.parametrize("cut", [False, True])
@pytest.mark.parametrize("fine", [False, True])
def test_streamed_tool_parsing_equals_parse_tool_calls(text: str, cut: bool, fine: bool) -> None:
    whole = ToolCallStreamer(fine=fine)  # the same parser given the text at once
    content, _ = whole.push(text)
    rest, _, calls = whole.finish(cut=cut)
    expected_content, expected_calls = (content + rest) or None, calls
    if not fine:
        parsed_content, parsed = parse_tool_calls(text, cut=cut)
        assert (parsed_content, [(c.name, c.arguments) for c in parsed]) == (
            expected_content,
            [(c.name, c.arguments) for c in expected_calls],
        )
    for seed in range(10):
        streamer = ToolCallStreamer(fine=fine)
        content, deltas, _ = feed(streamer, text, seed)
        rest, last, calls = streamer.finish(cut=cut)
        assert ((content + rest) or None) == expected_content
        expected = [(c.name, c.arguments) for c in expected_calls]
        assert [(c.name, c.arguments) for c in calls] == expected
        streamed = rebuilt(deltas + last)  # what was streamed adds up to the calls, ...
        if fine and len(streamed) == len(expected) + 1:  # ... and, under a grammar, the start of a cut one
            assert text.endswith(streamed[-1][1]) or streamed[-1][1] == ""
            streamed = streamed[:-1]
        assert streamed == expected


def test_calls_stream_as_they_are_generated() -> None:
    text = CALL + "\n" + CALL.replace("add", "mul")
    # free text: each call whole, as soon as its block closes (not all at the end)
    _, deltas, with_calls = feed(ToolCallStreamer(), text, 0)
    assert with_calls == 2 and [d["function"]["name"] for d in deltas] == ["add", "mul"]  # type: ignore[index]
    # under a grammar: the name first, then the arguments in pieces
    _, deltas, with_calls = feed(ToolCallStreamer(fine=True), text, 0)
    assert deltas[0]["function"] == {"name": "add", "arguments": ""} and with_calls > 6
    assert sum("id" in d for d in deltas) == 2


def test_one_call_when_parallel_calls_are_off() -> None:
    for fine in (False, True):
        streamer = ToolCallStreamer(fine=fine, max_calls=1)
        content, deltas, _ = feed(streamer, CALL + "\n" + CALL.replace("add", "mul"), 1)
        rest, last, calls = streamer.finish()
        assert [c.name for c in calls] == ["add"] and rebuilt(deltas + last) == [("add", '{"a": 1, "b": 2}')]
        assert (content + rest) == ""
