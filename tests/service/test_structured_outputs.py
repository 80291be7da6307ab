"""Structured outputs and forced tool calls on a random-weight tiny model, over HTTP with the openai client.

A random tiny model writes garbage unless constrained (checked below: its free replies never parse), so
every assertion that a reply parses and matches its schema is the grammar's doing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

torch = pytest.importorskip("torch")
openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")

from helpers_server import USER, Served, float32_hf, hf_logprobs, serve_tiny  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

SAMPLES = 50

NESTED = {  # nested objects
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 10},
        "address": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 8},
                "zip": {"type": "integer", "minimum": 0, "maximum": 99999},
                "geo": {
                    "type": "object",
                    "properties": {
                        "ok": {"type": "boolean"},
                        "n": {"type": "integer", "minimum": -9, "maximum": 9},
                    },
                    "required": ["ok", "n"],
                    "additionalProperties": False,
                },
            },
            "required": ["city", "zip", "geo"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "address"],
    "additionalProperties": False,
}
ENUMS = {  # enums, including a mixed-type one
    "type": "object",
    "properties": {
        "color": {"enum": ["red", "green", "blue"]},
        "size": {"type": "string", "enum": ["S", "M", "L", "XL"]},
        "mixed": {"enum": [1, "two", None, True]},
    },
    "required": ["color", "size", "mixed"],
    "additionalProperties": False,
}
ARRAYS = {  # arrays of enums, of arrays, of objects
    "type": "object",
    "properties": {
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 4},
        "grid": {
            "type": "array",
            "items": {
                "type": "array",
                "items": {"type": "integer", "minimum": 0, "maximum": 9},
                "maxItems": 3,
            },
            "maxItems": 3,
        },
        "points": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "x": {"type": "integer", "minimum": 0, "maximum": 99},
                    "on": {"type": "boolean"},
                },
                "required": ["x", "on"],
                "additionalProperties": False,
            },
            "maxItems": 3,
        },
    },
    "required": ["tags", "grid", "points"],
    "additionalProperties": False,
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "move",
            "description": "Move a piece.",
            "parameters": {
                "type": "object",
                "properties": {
                    "row": {"enum": ["A", "B", "C"]},
                    "col": {"type": "integer", "minimum": 1, "maximum": 3},
                },
                "required": ["row", "col"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "say",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string", "maxLength": 12}},
                "required": ["text"],
                "additionalProperties": False,
            },
        },
    },
]


@pytest.fixture(scope="module")
def served(tiny_model_path: Path) -> Iterator[Served]:
    s = serve_tiny(tiny_model_path, "tiny", max_model_len=2048)  # the tools alone take ~490 tiny tokens
    yield s
    s.close()


def _schema_format(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema, "strict": True}}


@pytest.mark.parametrize("schema", [NESTED, ENUMS, ARRAYS], ids=["nested", "enums", "arrays"])
def test_every_sampled_reply_matches_its_schema(served: Served, schema: dict[str, Any]) -> None:
    response = served.client.chat.completions.create(
        model="tiny", messages=USER, n=SAMPLES, seed=7, max_tokens=400, response_format=_schema_format(schema)
    )
    assert len(response.choices) == SAMPLES
    for choice in response.choices:
        assert choice.finish_reason == "stop", choice.message.content
        jsonschema.validate(json.loads(choice.message.content), schema)
        assert choice.token_ids[-1] in served.engine._scheduler._stop_ids.tolist()  # ends as a turn does
    # the constraint is what makes them parse: the same request without it never does
    free = served.client.chat.completions.create(
        model="tiny", messages=USER, n=SAMPLES, seed=7, max_tokens=60
    )
    assert sum(_parses(c.message.content, schema) for c in free.choices) == 0


def _parses(text: str | None, schema: dict[str, Any]) -> bool:
    try:
        jsonschema.validate(json.loads(text or ""), schema)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def test_json_object_replies_are_objects(served: Served) -> None:
    response = served.client.chat.completions.create(
        model="tiny",
        messages=USER,
        n=SAMPLES,
        seed=3,
        max_tokens=200,
        response_format={"type": "json_object"},
    )
    finished = [c for c in response.choices if c.finish_reason == "stop"]
    assert len(finished) >= SAMPLES // 2
    for choice in finished:
        assert isinstance(json.loads(choice.message.content), dict)
    for choice in response.choices:  # the rest were cut by max_tokens, and say so
        assert choice.finish_reason in ("stop", "length")


def test_a_reply_cut_by_max_tokens_says_length(served: Served) -> None:
    response = served.client.chat.completions.create(
        model="tiny", messages=USER, n=4, seed=1, max_tokens=3, response_format=_schema_format(NESTED)
    )
    for choice in response.choices:
        assert choice.finish_reason == "length" and len(choice.token_ids) == 3
        assert choice.message.content.startswith('{"name": "'[: len(choice.message.content)])


def _check_calls(choice: Any) -> set[str]:
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    assert choice.finish_reason == "tool_calls", choice.message.content
    assert choice.message.tool_calls and choice.message.content is None
    for call in choice.message.tool_calls:
        jsonschema.validate(json.loads(call.function.arguments), schemas[call.function.name])
    return {call.function.name for call in choice.message.tool_calls}


def test_tool_choice_required_always_yields_one_valid_call(served: Served) -> None:
    response = served.client.chat.completions.create(
        model="tiny",
        messages=USER,
        tools=TOOLS,
        tool_choice="required",
        parallel_tool_calls=False,
        n=SAMPLES,
        seed=5,
        max_tokens=300,
    )
    names = set()
    for choice in response.choices:
        names |= _check_calls(choice)
        assert len(choice.message.tool_calls) == 1
    assert names == {"move", "say"}  # "required" lets the model pick among the tools


def test_tool_choice_required_with_parallel_calls(served: Served) -> None:
    """Parallel calls may follow each other; a model that never stops calling is cut by max_tokens, like
    any reply (a random model prefers the newline before another call to the end-of-turn token)."""
    response = served.client.chat.completions.create(
        model="tiny", messages=USER, tools=TOOLS, tool_choice="required", n=20, seed=5, max_tokens=300
    )
    counts = []
    for choice in response.choices:
        if choice.finish_reason == "length":  # the calls before the cut, never the raw tags
            assert not choice.message.content and choice.message.tool_calls
            continue
        _check_calls(choice)
        counts.append(len(choice.message.tool_calls))
    assert len(counts) >= 10 and max(counts) > 1


def test_a_named_function_is_called_exactly_once(served: Served) -> None:
    response = served.client.chat.completions.create(
        model="tiny",
        messages=USER,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "say"}},
        n=20,
        seed=2,
        max_tokens=200,
    )
    for choice in response.choices:
        assert choice.finish_reason == "tool_calls"
        [call] = choice.message.tool_calls
        assert call.function.name == "say" and set(json.loads(call.function.arguments)) == {"text"}


def test_parallel_tool_calls_false_allows_one_call(served: Served) -> None:
    response = served.client.chat.completions.create(
        model="tiny",
        messages=USER,
        tools=TOOLS,
        tool_choice="required",
        parallel_tool_calls=False,
        n=20,
        seed=4,
        max_tokens=200,
    )
    for choice in response.choices:
        assert choice.finish_reason == "tool_calls" and len(choice.message.tool_calls) == 1
        assert choice.message.content is None


def test_auto_tools_with_a_json_response_format_give_calls_or_the_json_answer(served: Served) -> None:
    response = served.client.chat.completions.create(
        model="tiny",
        messages=USER,
        tools=TOOLS,
        response_format=_schema_format(ENUMS),
        n=SAMPLES,
        seed=9,
        max_tokens=300,
    )
    kinds = set()
    for choice in response.choices:
        if choice.finish_reason == "tool_calls":
            kinds.add("call")
        else:
            assert choice.finish_reason == "stop"
            jsonschema.validate(json.loads(choice.message.content), ENUMS)
            kinds.add("answer")
    assert kinds == {"call", "answer"}


class Inner(BaseModel):
    kind: Literal["cat", "dog"]
    flags: list[bool] = Field(max_length=3)


class Pet(BaseModel):
    age: int = Field(ge=0, le=30)
    inner: Inner


def test_openai_parse_with_a_pydantic_model(served: Served) -> None:
    completion = served.client.chat.completions.parse(
        model="tiny", messages=USER, response_format=Pet, n=10, seed=11, max_tokens=200
    )
    for choice in completion.choices:
        assert choice.finish_reason == "stop"
        assert isinstance(choice.message.parsed, Pet)


def test_streamed_constrained_reply_equals_the_non_streamed_one(served: Served) -> None:
    kwargs: dict[str, Any] = dict(
        model="tiny", messages=USER, seed=13, max_tokens=200, response_format=_schema_format(ARRAYS)
    )
    whole = served.client.chat.completions.create(**kwargs).choices[0]
    text, ids = "", []
    for chunk in served.client.chat.completions.create(**kwargs, stream=True):
        for c in chunk.choices:
            text += c.delta.content or ""
            ids += (c.model_extra or {}).get("token_ids") or []
    assert text == whole.message.content and ids == whole.token_ids


def test_constrained_tokens_report_the_models_raw_logprobs(served: Served, tiny_model_path: Path) -> None:
    """Training scores the sampled ids under the unconstrained policy, so that is the logprob reported."""
    response = served.client.chat.completions.create(
        model="tiny", messages=USER, seed=17, max_tokens=100, extra_body={"guided_choice": ["yes", "no way"]}
    )
    choice = response.choices[0]
    assert choice.message.content in ("yes", "no way")
    prompt_ids = response.model_extra["prompt_token_ids"]
    expected = hf_logprobs(float32_hf(tiny_model_path), prompt_ids, choice.token_ids)
    reported = [e.logprob for e in choice.logprobs.content]
    assert reported == pytest.approx(expected, abs=1e-4)
    assert reported[0] < -2.0  # a random model's raw logprob, not the ~log(1/2) of the masked distribution


async def test_free_rows_are_unchanged_by_constrained_rows_in_their_batch(served: Served) -> None:
    client = served.aclient()
    free: dict[str, Any] = dict(model="tiny", messages=USER, seed=21, max_tokens=40)
    solo = await client.chat.completions.create(**free)
    constrained = [
        client.chat.completions.create(
            model="tiny", messages=USER, seed=s, max_tokens=60, response_format=_schema_format(ENUMS)
        )
        for s in range(6)
    ]
    mixed, *others = await asyncio.gather(client.chat.completions.create(**free), *constrained)
    assert mixed.choices[0].token_ids == solo.choices[0].token_ids
    for other in others:
        jsonschema.validate(json.loads(other.choices[0].message.content), ENUMS)


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"response_format": _schema_format({"type": "frobnicate"})}, "response_format.json_schema.schema"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}},
            "response_format.json_schema.name",
        ),
        ({"response_format": {"type": "xml"}}, "response_format.type"),
        ({"extra_body": {"guided_regex": "[a-"}}, "guided_regex"),
        ({"extra_body": {"guided_choice": []}}, "guided_choice"),
        ({"extra_body": {"guided_json": {"type": "object"}, "guided_regex": "a"}}, "guided_regex"),
        (
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "fly"}}},
            "tool_choice.function.name",
        ),
        ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice"),
        ({"tools": TOOLS, "extra_body": {"guided_regex": "a+"}}, "tool_choice"),
    ],
)
def test_bad_constraints_get_400_naming_the_field(served: Served, extra: dict[str, Any], param: str) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        served.client.chat.completions.create(model="tiny", messages=USER, max_tokens=5, **extra)
    assert info.value.body["param"] == param, info.value.body


def test_guided_completion_params_make_the_student_repeat_the_teacher(served: Served) -> None:
    from openai.types.chat.chat_completion import ChatCompletion

    from art.guided_completion import get_guided_completion_params

    tools = [
        {
            "type": "function",
            "function": {
                "name": "forecast",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                    "required": ["city"],
                },
            },
        },
        {"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}},
    ]

    def teacher(message: dict[str, Any]) -> ChatCompletion:
        return ChatCompletion.model_validate(
            {
                "id": "t",
                "object": "chat.completion",
                "created": 0,
                "model": "teacher",
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", **message}}
                ],
            }
        )

    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "forecast", "arguments": '{"city": "Oslo", "days": 3}'},
    }
    guided_choice, tool_choice, frozen = get_guided_completion_params(teacher({"tool_calls": [call]}), tools)
    assert guided_choice is None and tool_choice == {"type": "function", "function": {"name": "forecast"}}
    student = served.client.chat.completions.create(
        model="tiny", messages=USER, seed=5, max_tokens=60, tools=frozen, tool_choice=tool_choice
    )
    (made,) = student.choices[0].message.tool_calls
    assert made.function.name == "forecast" and json.loads(made.function.arguments) == {
        "city": "Oslo",
        "days": 3,
    }
    assert student.choices[0].logprobs.content  # the student's own logprobs, for training

    guided_choice, tool_choice, frozen = get_guided_completion_params(teacher({"content": "Take the train."}))
    assert (tool_choice, frozen) == (None, None)
    student = served.client.chat.completions.create(
        model="tiny", messages=USER, seed=5, max_tokens=60, extra_body={"guided_choice": guided_choice}
    )
    assert student.choices[0].message.content == "Take the train."

    with pytest.raises(ValueError, match="'forecast', which is not among base_tools"):
        get_guided_completion_params(teacher({"tool_calls": [call]}), tools[1:])
