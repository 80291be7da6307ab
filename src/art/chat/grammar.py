"""Structured outputs: what a request constrains its reply to, and the grammar glue every engine shares.

`StructuredOutputs` is the engine-neutral description carried in `SamplingParams` (vLLM's field names, so the
vLLM engine passes it through as `structured_outputs`): exactly one of a JSON schema (`json`), any JSON
object (`json_object`), a regular expression, a list of `choice` strings, or a Lark `grammar` (llguidance's
dialect, where `%json {schema}` embeds a JSON schema). The server builds it from OpenAI's `response_format`,
from `tool_choice` "required" or a named function (`tool_call_grammar`: Hermes
`<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>` blocks whose arguments match each tool's
schema) and from vLLM's `guided_*` / `structured_outputs` extras.

Constrained decoding uses llguidance (chosen over xgrammar and outlines-core by measured cost per token on
our engine: benchmarks/bench_structured.py). `GrammarCompiler` wraps one tokenizer; its `matcher(...)` gives
a `GrammarMatcher` per sequence, which writes the allowed-token bitmask of the next position (one bit per
token id, int32 words, the layout llguidance and xgrammar share) and consumes each sampled token. Once a
grammar is complete only the end-of-turn tokens stay allowed, so a constrained reply always ends with one
(as an unconstrained reply does) unless max_tokens cuts it first.

JSON is generated compactly, with json.dumps' separators (", " and ": ") and no other whitespace: a model
cannot pad a reply with endless newlines, and the text reads as json.dumps would write it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

JSON_FORMAT: dict[str, Any] = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
"""llguidance's JSON options for every schema: compact, with json.dumps' separators."""


class GrammarError(ValueError):
    """A structured-output description that cannot be compiled (bad schema, regex or grammar)."""


class StructuredOutputs(BaseModel):
    """Exactly one constraint on a reply (see the module docstring); vLLM's `StructuredOutputsParams` names.

    Example: `StructuredOutputs(json={"type": "object", "properties": {"x": {"type": "integer"}}})`.
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    json_schema: dict[str, Any] | None = Field(default=None, alias="json")
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = Field(default=None, description="Lark, llguidance's dialect (%json allowed)")
    json_object: bool = False

    @model_validator(mode="after")
    def _exactly_one(self) -> StructuredOutputs:
        given = [
            name
            for name, value in (
                ("json", self.json_schema),
                ("regex", self.regex),
                ("choice", self.choice),
                ("grammar", self.grammar),
                ("json_object", self.json_object or None),
            )
            if value is not None
        ]
        if len(given) != 1:
            raise ValueError(
                f"exactly one of json, regex, choice, grammar, json_object must be set; got {given}"
            )
        if self.choice is not None and (not self.choice or not all(self.choice)):
            raise ValueError("choice must be a non-empty list of non-empty strings")
        return self

    def to_llguidance(self) -> str:
        """This constraint as an llguidance grammar (a string `LLMatcher` accepts)."""
        from llguidance import LLMatcher

        if self.json_schema is not None:
            return LLMatcher.grammar_from_json_schema(_with_format(self.json_schema))
        if self.json_object:
            return LLMatcher.grammar_from_json_schema(_with_format({"type": "object"}))
        if self.regex is not None:
            return LLMatcher.grammar_from_regex(self.regex)
        if self.choice is not None:
            return LLMatcher.grammar_from_lark("start: " + " | ".join(_lark_literal(c) for c in self.choice))
        assert self.grammar is not None
        return LLMatcher.grammar_from_lark(self.grammar)

    def check(self) -> None:
        """Raise GrammarError (with llguidance's message) unless this constraint compiles."""
        from llguidance import LLMatcher

        try:
            error = LLMatcher.validate_grammar(self.to_llguidance())
        except (ValueError, TypeError) as exc:
            raise GrammarError(str(exc)) from None
        if error:
            raise GrammarError(error.strip())


def _with_format(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema with our JSON layout options (replacing any llguidance options a client sent)."""
    return {**schema, "x-guidance": JSON_FORMAT}


def _lark_literal(text: str) -> str:
    """A Lark string literal matching `text` exactly (JSON escapes are Lark escapes too)."""
    return json.dumps(text, ensure_ascii=False)


def _call_schema(tool: Mapping[str, Any]) -> dict[str, Any]:
    """JSON schema of one Hermes tool call: {"name": <this tool>, "arguments": <its parameters>}."""
    function = tool["function"]
    parameters = function.get("parameters") or {"type": "object"}
    return {
        "type": "object",
        "properties": {"name": {"const": function["name"]}, "arguments": dict(parameters)},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def tool_call_grammar(
    tools: Sequence[Mapping[str, Any]],
    *,
    parallel: bool = True,
    answer_schema: Mapping[str, Any] | None = None,
) -> StructuredOutputs:
    """A Lark grammar for a reply made of Hermes tool calls of the given tools (OpenAI's `tool_choice`
    "required", or a named function when `tools` holds just that one).

    parallel: one or more calls (newline-separated, as the chat template writes them); else exactly one.
    answer_schema: also allow, instead of calls, a JSON answer matching this schema (tool_choice "auto"
    with a `response_format`).

    Example: `tool_call_grammar([{"type": "function", "function": {"name": "add", "parameters": {...}}}])`.
    """
    if not tools:
        raise GrammarError("a tool-call grammar needs at least one tool")
    schema = _call_schema(tools[0]) if len(tools) == 1 else {"anyOf": [_call_schema(t) for t in tools]}
    lines = [
        "start: " + ("calls | answer" if answer_schema is not None else "calls"),
        'calls: call ("\\n" call)*' if parallel else "calls: call",
        'call: "<tool_call>\\n" %json ' + json.dumps(_with_format(schema)) + ' "\\n</tool_call>"',
    ]
    if answer_schema is not None:
        lines.append("answer: %json " + json.dumps(_with_format(answer_schema)))
    return StructuredOutputs(grammar="\n".join(lines))


class GrammarMatcher:
    """One sequence's grammar state (llguidance's `LLMatcher`): next-token bitmasks, sampled tokens."""

    def __init__(self, matcher: Any) -> None:
        self._matcher = matcher

    def fill_bitmask(self, bitmask: Any, row: int) -> None:
        """Write the allowed next tokens into row `row` of a contiguous int32 bitmask tensor [rows, words]."""
        target = bitmask[row]
        self._matcher.unsafe_compute_mask_ptr(target.data_ptr(), target.numel() * target.element_size())

    def consume(self, token_id: int) -> bool:
        """Advance past a sampled token; False if the grammar did not allow it (the matcher is then in error)."""
        return bool(self._matcher.consume_token(token_id))

    @property
    def error(self) -> str:
        """The matcher's error ("" when none)."""
        return str(self._matcher.get_error())


_executor: Any = None  # llguidance's thread pool for a batch's masks (made at first use)


def fill_bitmasks(matchers: Sequence[Any], bitmask: Any) -> None:
    """Row i of a contiguous int32 bitmask tensor [rows, words] for matcher i: llguidance's matchers all
    at once on its thread pool (one call, the GIL released), any other kind one by one."""
    global _executor
    ours = [(m._matcher, i) for i, m in enumerate(matchers) if type(m) is GrammarMatcher]
    if len(ours) > 1:
        if _executor is None:
            from llguidance import LLExecutor

            _executor = LLExecutor(num_threads=os.cpu_count() or 1)
        row_bytes = bitmask.shape[1] * bitmask.element_size()
        _executor.unsafe_compute_mask_ptr(ours, bitmask.data_ptr(), row_bytes, bitmask.shape[0])
    for i, m in enumerate(matchers):
        if len(ours) <= 1 or type(m) is not GrammarMatcher:
            m.fill_bitmask(bitmask, i)


class GrammarCompiler:
    """Makes `GrammarMatcher`s for one tokenizer (thread-safe).

    vocab_size: the width of the model's logits (may exceed the tokenizer's length); stop_token_ids: the
    engine's end-of-turn tokens, the ones a complete grammar allows. Wrapping the tokenizer takes ~1-2 s for a
    50k vocabulary: it happens once, at the first `matcher` call (or `prepare()`).
    """

    def __init__(self, tokenizer: Any, *, vocab_size: int, stop_token_ids: Sequence[int]) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.stop_token_ids = list(stop_token_ids)
        self._lock = threading.Lock()
        self._ll_tokenizer: Any = None

    def prepare(self) -> None:
        """Wrap the tokenizer now (otherwise the first `matcher` call does)."""
        with self._lock:
            if self._ll_tokenizer is None:
                import llguidance.hf

                self._ll_tokenizer = llguidance.hf.from_tokenizer(
                    self.tokenizer, n_vocab=self.vocab_size, eos_token=self.stop_token_ids
                )

    def matcher(self, constraint: StructuredOutputs) -> GrammarMatcher:
        """A fresh matcher for `constraint`; raises GrammarError when it does not compile."""
        from llguidance import LLMatcher

        self.prepare()
        try:
            grammar = constraint.to_llguidance()
        except (ValueError, TypeError) as exc:
            raise GrammarError(str(exc)) from None
        matcher = LLMatcher(self._ll_tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise GrammarError(matcher.get_error().strip())
        return GrammarMatcher(matcher)
