"""OpenAI's wire format as the server accepts it: JSON bodies, request validation, errors.

Every bad request gets a 4xx in OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`,
naming the offending parameter, before anything reaches the engine:

- `decode_json_body`: the body must be one JSON value of at most `MAX_JSON_DEPTH` levels, in UTF-8 (or
  the UTF-16/32 that JSON allows), with no NaN/Infinity, no integer over 4300 digits and no lone surrogate.
- Types are strict, as OpenAI's are: `max_tokens="16"`, `n="2"`, `max_tokens=16.0` or `stream="yes"` are
  400 `invalid_type`; numbers are bounded (temperature 0..2, n 1..128, ...).
- Every field OpenAI or vLLM defines is known here and either honoured or, when set to anything but its
  default, refused with a 400 naming it (`REFUSED`); a few only matter to OpenAI's hosted service and are
  accepted with no effect (`NO_EFFECT`). Any other field is refused as OpenAI does: "Unrecognized request
  argument supplied: <name>".

`SamplingRequest` holds what /v1/chat/completions and /v1/completions share (sampling fields, vLLM's extras,
structured outputs); `ChatCompletionRequest` adds messages and tools. Messages come out normalised for the
chat template (see `art.openai_server.chat_messages`).
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from art.chat.grammar import GrammarError, StructuredOutputs, tool_call_grammar
from art.engines.base import SamplingParams
from art.openai_server.chat_messages import check_tool, normalize_message
from art.openai_server.errors import OpenAIError, bad_request

MAX_JSON_DEPTH = 64
"""Nesting levels a request body may have (OpenAI's own structured-output schemas stop at 10)."""

INT64_MAX = 2**63 - 1

MAX_GUIDED_CHOICES = 1024
"""Most `guided_choice` (or `structured_outputs.choice`) entries a request may give (400 beyond)."""

MAX_GRAMMAR_CHARS = 256 * 1024
"""Most characters a constraint's source may have (schema JSON, regex, choices, grammar; 400 beyond):
compiling one costs time and memory in proportion, and 100k choices took seconds and then failed."""
_SURROGATE = re.compile("[\ud800-\udfff]")


# ---- JSON bodies ----


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def decode_json_body(raw: bytes) -> Any:
    """The JSON value of a request body; raises OpenAIError(400) saying what is wrong with it."""
    if not raw.strip():
        raise bad_request("The request body is empty; send a JSON object.", code="invalid_json")
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise _too_deep() from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, int digits limit, NaN/Infinity
        raise bad_request(f"The request body is not valid JSON: {exc}", code="invalid_json") from None
    _check_json_value(value)
    return value


def _too_deep() -> OpenAIError:
    return bad_request(
        f"The request body nests deeper than {MAX_JSON_DEPTH} levels.", code="json_too_deeply_nested"
    )


def _check_json_value(value: Any) -> None:
    """Depth limit and well-formed strings (no lone surrogates), without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth > MAX_JSON_DEPTH:
                raise _too_deep()
            for key, inner in item.items():
                _check_string(key)
                stack.append((inner, depth + 1))
        elif isinstance(item, list):
            if depth > MAX_JSON_DEPTH:
                raise _too_deep()
            stack.extend((inner, depth + 1) for inner in item)
        elif isinstance(item, str):
            _check_string(item)


def _check_string(text: str) -> None:
    if not text.isascii() and _SURROGATE.search(text):
        raise bad_request(
            "The request body holds a lone UTF-16 surrogate (\\ud800-\\udfff) in a string; send valid Unicode.",
            code="invalid_json",
        )


# ---- validation errors ----


_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (type(None), "null"),
    (bool, "a boolean"),  # before int: a bool is an int to Python, not to JSON
    (int, "an integer"),
    (float, "a decimal number"),
    (str, "a string"),
    (list, "an array"),
    (dict, "an object"),
)


def json_type(value: Any) -> str:
    """How an error message names `value`'s JSON type ("an integer"); a Python type's name otherwise."""
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), type(value).__name__)


_EXPECTED = {
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "a boolean",
    "string_type": "a string",
    "list_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
    "tuple_type": "an array",
}


def param_path(loc: tuple[int | str, ...]) -> str:
    """`("messages", 0, "role")` -> `"messages[0].role"`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def validation_error(exc: ValidationError) -> OpenAIError:
    """The 400 for pydantic's first error, in OpenAI's words."""
    first = exc.errors()[0]
    param = param_path(tuple(first["loc"])) or None
    kind = first["type"]
    if kind == "extra_forbidden":
        return bad_request(
            f"Unrecognized request argument supplied: {param}", param=param, code="unknown_parameter"
        )
    if kind == "missing":
        return bad_request(
            f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter"
        )
    if kind in _EXPECTED:
        got = json_type(first.get("input"))
        return bad_request(
            f"Invalid type for '{param}': expected {_EXPECTED[kind]}, but got {got} instead.",
            param=param,
            code="invalid_type",
        )
    message = str(first["msg"]).removeprefix("Value error, ")
    return bad_request(f"Invalid value for '{param}': {message}.", param=param, code="invalid_value")


# ---- fields every endpoint shares ----

NO_EFFECT = (
    "user",
    "metadata",
    "service_tier",
    "store",
    "prompt_cache_key",
    "safety_identifier",
    "return_token_ids",
)
"""Accepted, with no effect here: they concern OpenAI's hosted service (or ask for what we always send)."""

REFUSED: dict[str, tuple[tuple[Any, ...], str]] = {
    # name: (values that mean "not used", why it is refused otherwise)
    "audio": ((None,), "audio output is not supported"),
    "functions": ((None, []), "the deprecated 'functions' is not supported: use 'tools'"),
    "function_call": ((None,), "the deprecated 'function_call' is not supported: use 'tool_choice'"),
    "prediction": ((None,), "predicted outputs are not supported"),
    "reasoning_effort": ((None,), "the served models do not reason: omit reasoning_effort"),
    "verbosity": ((None,), "verbosity is not supported"),
    "web_search_options": ((None,), "web search is not supported"),
    "best_of": ((None, 1), "best_of > 1 is not supported: use n and pick"),
    "use_beam_search": ((None, False), "beam search is not supported"),
    "length_penalty": ((None, 1, 1.0), "length_penalty applies to beam search, which is not supported"),
    "min_tokens": ((None, 0), "min_tokens is not supported"),
    "include_stop_str_in_output": ((None, False), "include_stop_str_in_output is not supported"),
    "skip_special_tokens": ((None, True), "special tokens are always skipped in text (token_ids keep them)"),
    "spaces_between_special_tokens": ((None, True), "spaces_between_special_tokens is not supported"),
    "prompt_logprobs": ((None,), "prompt_logprobs is not supported"),
    "allowed_token_ids": (
        (None,),
        "allowed_token_ids is not supported: use structured_outputs or logit_bias",
    ),
    "bad_words": ((None, []), "bad_words is not supported: use logit_bias"),
    "truncate_prompt_tokens": ((None,), "truncate_prompt_tokens is not supported"),
    "logits_processors": ((None, []), "custom logits processors are not supported"),
    "guided_decoding_backend": ((None,), "the structured-output backend is fixed (llguidance)"),
    "guided_whitespace_pattern": ((None,), "JSON whitespace is fixed (compact, json.dumps separators)"),
    "structural_tag": ((None,), "structural tags are not supported"),
    "priority": ((None, 0), "request priorities are not supported"),
    "echo": ((None, False), "echo is not supported"),
    "suffix": ((None, ""), "suffix (fill-in-the-middle) is not supported"),
    "add_generation_prompt": ((None, True), "the assistant turn is always opened (trainer and engine agree)"),
    "continue_final_message": ((None, False), "continue_final_message is not supported"),
    "add_special_tokens": (
        (None, False),
        "add_special_tokens is not supported (the chat template adds them)",
    ),
    "chat_template": ((None,), "the chat template is the model's (the trainer renders with it too)"),
    "documents": ((None, []), "documents are not supported"),
    "mm_processor_kwargs": ((None, {}), "multi-modal inputs are not supported"),
    "cache_salt": ((None,), "cache_salt is not supported"),
    "kv_transfer_params": ((None,), "kv_transfer_params is not supported"),
    "vllm_xargs": ((None, {}), "vllm_xargs is not supported"),
    "modalities": ((None, ["text"]), "only the 'text' modality is supported"),
}


class StreamOptions(BaseModel):
    """`stream_options`: `include_usage` adds a last chunk with the usage (OpenAI's behaviour)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    include_usage: bool | None = None


class SamplingRequest(BaseModel):
    """The fields of /v1/chat/completions and /v1/completions that decide how tokens are sampled."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)
    refused: ClassVar[tuple[str, ...]] = ()  # names of `REFUSED` this endpoint knows (subclasses set it)

    model: str = Field(min_length=1, max_length=512)
    n: int = Field(1, ge=1, le=128)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=1, le=INT64_MAX)
    seed: int | None = Field(None, ge=-INT64_MAX - 1, le=INT64_MAX)
    stop: Any = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    logit_bias: dict[str, float] | None = None
    response_format: dict[str, Any] | None = None
    # vLLM's extras (clients send them in `extra_body`)
    top_k: int | None = Field(None, ge=-1, le=2**31 - 1)
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    repetition_penalty: float | None = Field(None, gt=0.0, le=100.0)
    stop_token_ids: list[int] | None = None
    ignore_eos: bool | None = False
    structured_outputs: dict[str, Any] | None = None
    guided_json: Any = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None
    # accepted, no effect (NO_EFFECT)
    user: str | None = None
    metadata: dict[str, str] | None = None
    service_tier: str | None = None
    store: bool | None = None
    prompt_cache_key: str | None = None
    safety_identifier: str | None = None
    return_token_ids: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _refuse(cls, body: Any) -> Any:
        """Refuse a known-but-unsupported field set to a non-default value; let the others validate."""
        if not isinstance(body, dict):
            return body
        rest = dict(body)
        for name in cls.refused:
            if name in rest:
                unused, why = REFUSED[name]
                value = rest.pop(name)
                if value is not None and not any(value == u and type(value) is type(u) for u in unused):
                    raise _Refused(name, why)
        return rest

    @classmethod
    def parse(cls, body: Any) -> Any:
        """Validate a decoded JSON body; raises OpenAIError(400) naming the offending parameter."""
        if not isinstance(body, dict):
            raise bad_request(f"The request body must be a JSON object, not {json_type(body)}.")
        try:
            request = cls.model_validate(body)
        except _Refused as exc:
            raise exc.error() from None
        except ValidationError as exc:
            refused = next(
                (e.get("ctx", {}).get("error") for e in exc.errors() if e["type"] == "value_error"), None
            )
            if isinstance(refused, _Refused):
                raise refused.error() from None
            raise validation_error(exc) from None
        request._check()
        return request

    def _check(self) -> None:
        if self.stream_options is not None and not self.stream:
            raise bad_request(
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                param="stream_options",
            )
        stop = self.stop
        if not (
            stop is None
            or isinstance(stop, str)
            or (isinstance(stop, list) and all(isinstance(s, str) for s in stop))
        ):
            raise bad_request(
                f"Invalid type for 'stop': expected a string or an array of strings, but got {json_type(stop)} instead.",
                param="stop",
                code="invalid_type",
            )
        for i, token in enumerate(self.stop_token_ids or []):
            if not 0 <= token <= 2**31 - 1:
                raise bad_request(
                    f"Invalid value for 'stop_token_ids[{i}]': {token} is not a token id.",
                    param="stop_token_ids",
                )
        for key, bias in (self.logit_bias or {}).items():
            if not key.isdigit() or len(key) > 10:
                raise bad_request(
                    f"Invalid key in 'logit_bias': {key!r} is not a token id (a string of digits).",
                    param="logit_bias",
                )
            if not -100.0 <= bias <= 100.0:
                raise bad_request(
                    f"Invalid value for 'logit_bias[{key}]': {bias} is outside [-100, 100].",
                    param="logit_bias",
                )
        self.constraint()  # raises on a bad schema, regex, choice or grammar

    @property
    def stop_list(self) -> list[str]:
        """Stop strings as a list."""
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)

    def constraint(self) -> StructuredOutputs | None:
        """The structured output the reply must match (response_format, guided_*, structured_outputs)."""
        sources = [
            name
            for name in (
                "structured_outputs",
                "guided_json",
                "guided_regex",
                "guided_choice",
                "guided_grammar",
            )
            if getattr(self, name) is not None
        ]
        fmt = _response_format(self.response_format)
        if fmt is not None:
            sources.append("response_format")
        if len(sources) > 1:
            raise bad_request(
                f"Give at most one of {', '.join(sources)}: each constrains the whole reply.",
                param=sources[1],
            )
        if not sources:
            return None
        name = sources[0]
        if name == "response_format":
            return _checked(
                fmt,
                "response_format.json_schema.schema"
                if self.response_format and self.response_format.get("type") == "json_schema"
                else "response_format",
            )
        if name == "structured_outputs":
            try:
                spec = StructuredOutputs.model_validate(self.structured_outputs)
            except ValidationError as exc:
                raise bad_request(
                    f"Invalid value for 'structured_outputs': {exc.errors()[0]['msg']}.", param=name
                ) from None
            return _checked(spec, name)
        if name == "guided_json":
            schema = self.guided_json
            if isinstance(schema, str):
                try:
                    schema = json.loads(schema)
                except ValueError:
                    raise bad_request(
                        "Invalid value for 'guided_json': not a JSON schema.", param=name
                    ) from None
            if not isinstance(schema, dict):
                raise bad_request(
                    "Invalid type for 'guided_json': expected an object (a JSON schema).", param=name
                )
            return _checked(StructuredOutputs(json=schema), name)
        try:
            spec = StructuredOutputs.model_validate({name.removeprefix("guided_"): getattr(self, name)})
        except ValidationError as exc:
            raise bad_request(f"Invalid value for '{name}': {exc.errors()[0]['msg']}.", param=name) from None
        return _checked(spec, name)

    def sampling_params(
        self, *, seed: int, max_tokens: int | None, top_logprobs: int, constraint: StructuredOutputs | None
    ) -> SamplingParams:
        """The engine's SamplingParams for one choice."""
        return SamplingParams(
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p,
            max_tokens=max_tokens,
            seed=seed,
            top_logprobs=top_logprobs,
            ignore_eos=bool(self.ignore_eos),
            top_k=max(self.top_k or 0, 0),
            min_p=self.min_p or 0.0,
            repetition_penalty=1.0 if self.repetition_penalty is None else self.repetition_penalty,
            presence_penalty=self.presence_penalty or 0.0,
            frequency_penalty=self.frequency_penalty or 0.0,
            stop_token_ids=tuple(self.stop_token_ids or ()),
            logit_bias={int(k): v for k, v in (self.logit_bias or {}).items()},
            structured_outputs=constraint,
        )


class _Refused(ValueError):
    """A known field the server does not support, set to a non-default value."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(name)
        self.name, self.why = name, why

    def error(self) -> OpenAIError:
        return bad_request(
            f"'{self.name}' is not supported by this server: {self.why}.",
            param=self.name,
            code="unsupported_parameter",
        )


def _response_format(value: dict[str, Any] | None) -> StructuredOutputs | None:
    """OpenAI's response_format as a constraint (None for "text" or absent)."""
    if value is None:
        return None
    kind = value.get("type")
    if kind == "text" and set(value) == {"type"}:
        return None
    if kind == "json_object" and set(value) == {"type"}:
        return StructuredOutputs(json_object=True)
    if kind != "json_schema":
        raise bad_request(
            f"Invalid value for 'response_format.type': {kind!r}. Supported: 'text', 'json_object', 'json_schema'.",
            param="response_format.type",
        )
    extra = set(value) - {"type", "json_schema"}
    if extra:
        raise bad_request(
            f"Unrecognized request argument supplied: response_format.{sorted(extra)[0]}",
            param="response_format",
        )
    spec = value.get("json_schema")
    if not isinstance(spec, dict):
        raise bad_request(
            "Missing required parameter: 'response_format.json_schema'.", param="response_format.json_schema"
        )
    name = spec.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
        raise bad_request(
            "Invalid value for 'response_format.json_schema.name': 1-64 letters, digits, '_' or '-' required.",
            param="response_format.json_schema.name",
        )
    unknown = set(spec) - {"name", "schema", "strict", "description"}
    if unknown:
        raise bad_request(
            f"Unrecognized request argument supplied: response_format.json_schema.{sorted(unknown)[0]}",
            param="response_format.json_schema",
        )
    if spec.get("strict") not in (None, True, False) or not isinstance(spec.get("description", ""), str):
        raise bad_request(
            "Invalid type for 'response_format.json_schema.strict' or '.description'.",
            param="response_format.json_schema",
        )
    schema = spec.get("schema", {})
    if not isinstance(schema, dict):
        raise bad_request(
            "Invalid type for 'response_format.json_schema.schema': expected an object (a JSON schema).",
            param="response_format.json_schema.schema",
        )
    # strict or not, the reply is held to the schema: constrained decoding costs nothing extra for it
    return StructuredOutputs(json=schema)


def grammar_size(spec: StructuredOutputs) -> int:
    """Characters of a constraint's source (schema JSON, regex, choices or grammar): what compiling costs."""
    if spec.json_schema is not None:
        return len(json.dumps(spec.json_schema))
    if spec.choice is not None:
        return sum(len(c) + 3 for c in spec.choice)  # each becomes a quoted Lark alternative
    return len(spec.regex or spec.grammar or "")


def check_grammar_limits(spec: StructuredOutputs, param: str) -> None:
    """Refuse (400, naming the limit) a constraint too large to compile in reasonable time and memory:
    more than `MAX_GUIDED_CHOICES` choices, or more than `MAX_GRAMMAR_CHARS` characters of source."""
    if spec.choice is not None and len(spec.choice) > MAX_GUIDED_CHOICES:
        raise bad_request(
            f"Invalid value for '{param}': {len(spec.choice)} choices; this server accepts at most "
            f"{MAX_GUIDED_CHOICES} (MAX_GUIDED_CHOICES).",
            param=param,
            code="grammar_too_large",
        )
    size = grammar_size(spec)
    if size > MAX_GRAMMAR_CHARS:
        raise bad_request(
            f"Invalid value for '{param}': the constraint is {size} characters long; this server accepts at "
            f"most {MAX_GRAMMAR_CHARS} (MAX_GRAMMAR_CHARS).",
            param=param,
            code="grammar_too_large",
        )


def _checked(spec: StructuredOutputs | None, param: str) -> StructuredOutputs | None:
    if spec is not None:
        check_grammar_limits(spec, param)
        try:
            spec.check()
        except GrammarError as exc:
            raise bad_request(
                f"Invalid value for '{param}': {exc}", param=param, code="invalid_schema"
            ) from None
    return spec


# ---- /v1/chat/completions ----


class ChatCompletionRequest(SamplingRequest):
    """The fields of POST /v1/chat/completions (see the module docstring)."""

    refused: ClassVar[tuple[str, ...]] = tuple(n for n in REFUSED if n not in ("best_of", "suffix"))

    messages: list[Any] = Field(min_length=1)
    tools: list[Any] | None = None
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    max_completion_tokens: int | None = Field(None, ge=1, le=INT64_MAX)
    # vLLM's: logprob entries name their token `token_id:<id>` (ids are in `token_ids` anyway)
    return_tokens_as_token_ids: bool | None = None
    # vLLM's; taken only where the template reads none of them (checked against the served model's
    # template when the prompt is rendered): otherwise the prompt would differ from the trainer's
    chat_template_kwargs: dict[str, Any] | None = None
    # NVIDIA Dynamo's request extension (openpipe-art 0.5.23 asks it for `engine_data`): accepted, no effect
    nvext: dict[str, Any] | None = None

    def _check(self) -> None:
        if self.top_logprobs and not self.logprobs:
            raise bad_request("'top_logprobs' requires 'logprobs' to be true.", param="top_logprobs")
        self.messages = [normalize_message(m, i) for i, m in enumerate(self.messages)]
        for i, tool in enumerate(self.tools or []):
            check_tool(tool, i)
        self.forced_tools()  # checks tool_choice
        super()._check()  # then the constraint, which may be built from the tools

    @property
    def max_new_tokens(self) -> int | None:
        """`max_completion_tokens`, else `max_tokens`, else None (until the context window is full)."""
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    @property
    def parse_tools(self) -> bool:
        """Whether tool calls are parsed out of replies (tools given and tool_choice is not "none")."""
        return bool(self.tools) and self.tool_choice != "none"

    def forced_tools(self) -> list[dict[str, Any]] | None:
        """The tools a reply must call (tool_choice "required": all; a named function: that one), else None."""
        choice = self.tool_choice
        if choice in (None, "auto", "none"):
            return None
        if choice == "required" or isinstance(choice, dict):
            if not self.tools:
                raise bad_request(
                    "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
                    param="tool_choice",
                )
            if choice == "required":
                return list(self.tools)
            function = choice.get("function") if choice.get("type") == "function" else None
            name = function.get("name") if isinstance(function, dict) else None
            if (
                not isinstance(function, dict)
                or not isinstance(name, str)
                or set(choice) != {"type", "function"}
                or set(function) != {"name"}
            ):
                raise bad_request(
                    "Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or "
                    '{"type": "function", "function": {"name": ...}}.',
                    param="tool_choice",
                )
            named = [t for t in self.tools if t["function"]["name"] == name]
            if not named:
                raise bad_request(
                    f"Invalid value for 'tool_choice': no tool named {name!r} in 'tools'.",
                    param="tool_choice.function.name",
                )
            return named
        raise bad_request(
            f"Invalid value for 'tool_choice': {choice!r}. Supported: 'none', 'auto', 'required' or a named function.",
            param="tool_choice",
        )

    def constraint(self) -> StructuredOutputs | None:
        """The reply's constraint: forced tool calls, or response_format / guided_* (with tools and
        tool_choice "auto", a JSON response_format still lets the model call a tool instead)."""
        answer = super().constraint()
        forced = self.forced_tools()
        parallel = self.parallel_tool_calls is not False
        if forced is not None:  # a named function is called once; "required" allows parallel calls
            named = isinstance(self.tool_choice, dict)
            return _checked(tool_call_grammar(forced, parallel=parallel and not named), "tool_choice")
        if answer is None or not self.parse_tools:
            return answer
        if answer.json_schema is None and not answer.json_object:
            raise bad_request(
                "With 'tools' and tool_choice 'auto', only a JSON response_format can constrain the reply; "
                "set tool_choice 'none' or 'required' to use guided_regex, guided_choice or a grammar.",
                param="tool_choice",
            )
        schema = answer.json_schema if answer.json_schema is not None else {"type": "object"}
        return _checked(
            tool_call_grammar(self.tools or [], parallel=parallel, answer_schema=schema), "response_format"
        )
