"""Structured-output grammars: the engine-neutral description and the llguidance glue (no model needed:
random walks through the allowed tokens must always spell a valid reply)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llguidance")
torch = pytest.importorskip("torch")

from art.chat.grammar import (  # noqa: E402
    GrammarCompiler,
    GrammarError,
    StructuredOutputs,
    fill_bitmasks,
    tool_call_grammar,
)
from art.chat.tool_calls import parse_tool_calls  # noqa: E402


@pytest.fixture(scope="module")
def compiler(tiny_model_path: Path) -> GrammarCompiler:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    return GrammarCompiler(tokenizer, vocab_size=len(tokenizer), stop_token_ids=[tokenizer.eos_token_id])


def _walk(compiler: GrammarCompiler, constraint: StructuredOutputs, seed: int, limit: int = 400) -> str:
    """Pick uniformly among the allowed tokens until an end-of-turn token; the text before it."""
    rng = random.Random(seed)
    matcher = compiler.matcher(constraint)
    words = (compiler.vocab_size + 31) // 32
    bitmask = torch.zeros(1, words, dtype=torch.int32)
    ids: list[int] = []
    for _ in range(limit):
        fill_bitmasks([matcher], bitmask)
        bits = ((bitmask[0, :, None] >> torch.arange(32, dtype=torch.int32)) & 1).flatten()[
            : compiler.vocab_size
        ]
        allowed = bits.nonzero().flatten().tolist()
        token = rng.choice(allowed)
        assert matcher.consume(token), matcher.error
        if token in compiler.stop_token_ids:
            return str(compiler.tokenizer.decode(ids))
        ids.append(token)
    raise AssertionError(f"no end after {limit} tokens: {compiler.tokenizer.decode(ids)!r}")


def test_exactly_one_constraint() -> None:
    assert StructuredOutputs(json={"type": "object"}).json_schema == {"type": "object"}
    assert StructuredOutputs.model_validate({"json": {"type": "object"}}).json_schema == {"type": "object"}
    for bad in ({}, {"regex": "a", "choice": ["b"]}, {"choice": []}, {"choice": [""]}):
        with pytest.raises(ValueError, match=r"exactly one|non-empty"):
            StructuredOutputs.model_validate(bad)


@pytest.mark.parametrize(
    "bad",
    [{"json": {"type": "frob"}}, {"regex": "(a"}, {"grammar": "start: %%%"}, {"json": {"$ref": "#/missing"}}],
)
def test_constraints_that_do_not_compile_say_why(bad: dict[str, Any]) -> None:
    with pytest.raises(GrammarError):
        StructuredOutputs.model_validate(bad).check()


def test_random_walks_of_a_schema_are_valid_compact_json(compiler: GrammarCompiler) -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "minimum": 0, "maximum": 50},
            "b": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 3},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    for seed in range(10):
        text = _walk(compiler, StructuredOutputs(json=schema), seed)
        value = json.loads(text)
        assert 0 <= value["a"] <= 50 and set(value["b"]) <= {"x", "y"}
        assert text == json.dumps(value)  # compact, json.dumps' separators


def test_random_walks_of_choice_and_regex(compiler: GrammarCompiler) -> None:
    choices = ['say "hi"', "ne\nw", "é"]
    assert {_walk(compiler, StructuredOutputs(choice=choices), s) for s in range(20)} == set(choices)
    for seed in range(10):
        assert _walk(compiler, StructuredOutputs(regex="[0-9]{2}-[a-c]+"), seed)[2] == "-"


def test_tool_call_grammar_spells_hermes_calls_that_parse(compiler: GrammarCompiler) -> None:
    tools = [
        {"type": "function", "function": {"name": "add", "parameters": {
            "type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}},
            "required": ["a"], "additionalProperties": False}}},
        {"type": "function", "function": {"name": "noop", "parameters": {
            "type": "object", "properties": {}, "additionalProperties": False}}},
    ]  # fmt: skip
    names = set()
    for seed in range(12):
        text = _walk(compiler, tool_call_grammar(tools, parallel=False), seed)
        content, calls = parse_tool_calls(text)
        assert content is None and len(calls) == 1, text
        names.add(calls[0].name)
        if calls[0].name == "add":
            assert 0 <= json.loads(calls[0].arguments)["a"] <= 9
    assert names == {"add", "noop"}
    answer = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    kinds = set()
    for seed in range(30):
        text = _walk(compiler, tool_call_grammar(tools, answer_schema=answer), seed)
        kinds.add("call" if parse_tool_calls(text)[1] else type(json.loads(text)["ok"]).__name__)
    assert kinds == {"call", "bool"}
