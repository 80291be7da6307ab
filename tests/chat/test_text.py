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
        CALL + '<tool_call>{"name": "x", "arguments": 3}</tool_call>',
        "<tool_call>",
        "",
    ],
)
def test_unparseable_text_stays_content(text: str) -> None:
    content, calls = parse_tool_calls(text)
    assert calls == [] and content == (text or None)


@pytest.mark.parametrize(
    "text",
    [
        "plain text  \n",
        "Sure.\n\n" + CALL,
        CALL + "\n" + CALL,
        "x <tool_call>{bad</tool_call>",
        "a <tool_ca",
        "<tool",
    ],
)
def test_streamed_tool_parsing_equals_parse_tool_calls(text: str) -> None:
    rng = random.Random(0)
    expected_content, expected_calls = parse_tool_calls(text)
    for _ in range(20):
        streamer, content, i = ToolCallStreamer(), "", 0
        while i < len(text):
            step = rng.randint(1, 6)
            content += streamer.push(text[i : i + step])
            i += step
        rest, calls = streamer.finish()
        assert ((content + rest) or None) == expected_content
        assert [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in expected_calls]
