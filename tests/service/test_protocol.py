"""The server's contract is strict and total: every bad request is a 4xx in OpenAI's shape naming the
field, unsupported fields are refused (never ignored), vLLM's extras are honoured, and a client that leaves
before sending its body costs one log line."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from helpers_server import KEY, USER, Served, float32_hf, hf_logprobs, serve_tiny  # noqa: E402
from helpers_wait import wait_until  # noqa: E402

from art.openai_server.completions import CompletionRequest  # noqa: E402
from art.openai_server.protocol import MAX_JSON_DEPTH, NO_EFFECT, REFUSED, ChatCompletionRequest  # noqa: E402


@pytest.fixture(scope="module")
def served(tiny_model_path: Path) -> Iterator[Served]:
    s = serve_tiny(tiny_model_path, "tiny", max_body_bytes=300_000)
    yield s
    s.close()


def post(
    served: Served, body: bytes | str | dict[str, Any], path: str = "/chat/completions", **headers: str
) -> Any:
    content = json.dumps(body) if isinstance(body, dict) else body
    return httpx.post(
        served.url + path,
        content=content,
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json", **headers},
        timeout=60,
    )


def assert_openai_error(response: Any, status: int, param: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    if param is not None:
        assert error["param"] == param, error
    return dict(error)


BASE: dict[str, Any] = {"model": "tiny", "messages": USER, "max_tokens": 2}


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("max_tokens", "16", "invalid_type"),
        ("max_tokens", 16.0, "invalid_type"),
        ("max_tokens", True, "invalid_type"),
        ("n", "2", "invalid_type"),
        ("stream", "yes", "invalid_type"),
        ("stream", 1, "invalid_type"),
        ("temperature", "0.5", "invalid_type"),
        ("logprobs", "true", "invalid_type"),
        ("seed", 2**64, "invalid_value"),
        ("max_tokens", 10**100, "invalid_value"),
        ("top_logprobs", 21, "invalid_value"),
        ("stop", 5, "invalid_type"),
        ("stop", ["a", 1], "invalid_type"),
        ("logit_bias", {"abc": 1}, None),
        ("logit_bias", {"5": 101}, None),
        ("messages", [], "invalid_value"),
        ("messages", "hi", "invalid_type"),
        ("model", "", "invalid_value"),
        ("stream_options", {"include_usage": True}, None),  # without stream: true
        ("frobnicate", 1, "unknown_parameter"),
    ],
)
def test_types_and_values_are_strict(served: Served, field: str, value: Any, code: str | None) -> None:
    error = assert_openai_error(post(served, {**BASE, field: value}), 400, field)
    if code is not None:
        assert error["code"] == code


@pytest.mark.parametrize(
    ("message", "param"),
    [
        ({"role": "tool", "content": "42"}, "messages[1].tool_call_id"),
        ({"role": "tool", "content": "42", "tool_call_id": 7}, "messages[1].tool_call_id"),
        ({"role": "user"}, "messages[1].content"),
        ({"role": "user", "content": "x", "name": 3}, "messages[1].name"),
        ({"role": "user", "content": "x", "reasoning_content": "hm"}, "messages[1].reasoning_content"),
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
            "messages[1].content",
        ),
        (
            {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]},
            "messages[1].tool_calls[0].function.arguments",
        ),
        ("hello", "messages[1]"),
    ],
)
def test_malformed_messages_name_the_field(served: Served, message: Any, param: str) -> None:
    assert_openai_error(post(served, {**BASE, "messages": [*USER, message]}), 400, param)


def test_empty_fields_clients_echo_back_are_accepted(served: Served) -> None:
    echoed = {"role": "assistant", "content": "hi", "refusal": None, "audio": None, "function_call": None}
    response = post(served, {**BASE, "messages": [*USER, echoed, *USER]})
    assert response.status_code == 200, response.text


def _a_used_value(unused: tuple[Any, ...]) -> Any:
    """A value that asks for the feature (not one of the values that mean "not used")."""
    kinds = {type(u) for u in unused if u is not None}
    if bool in kinds:
        return not next(u for u in unused if isinstance(u, bool))
    if int in kinds or float in kinds:
        return 3
    if ["text"] in unused:
        return ["audio"]
    if dict in kinds:
        return {"x": 1}
    if list in kinds:
        return ["x"]
    return "x"


@pytest.mark.parametrize("field", sorted(REFUSED))
def test_every_known_unsupported_field_is_refused_by_name(served: Served, field: str) -> None:
    if field in ChatCompletionRequest.refused:
        path, body = "/chat/completions", dict(BASE)
    else:
        assert field in CompletionRequest.refused
        path, body = "/completions", {"model": "tiny", "prompt": "hi", "max_tokens": 2}
    error = assert_openai_error(
        post(served, {**body, field: _a_used_value(REFUSED[field][0])}, path), 400, field
    )
    assert error["code"] == "unsupported_parameter" and field in error["message"]
    assert post(served, {**body, field: None}, path).status_code == 200  # null means "not used"


@pytest.mark.parametrize("field", NO_EFFECT)
def test_fields_without_effect_here_are_accepted(served: Served, field: str) -> None:
    value: Any = (
        {"k": "v"} if field == "metadata" else (True if field in ("store", "return_token_ids") else "x")
    )
    assert post(served, {**BASE, field: value}).status_code == 200


def test_json_structure_limits(served: Served) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert_openai_error(post(served, f'{{"model": "tiny", "messages": {deep}}}'), 400)
    nested: Any = "x"
    for _ in range(MAX_JSON_DEPTH + 1):
        nested = {"a": nested}
    assert_openai_error(post(served, {**BASE, "metadata": nested}), 400)
    assert (
        "digits"
        in assert_openai_error(post(served, '{"model": "tiny", "max_tokens": 1' + "0" * 5000 + "}"), 400)[
            "message"
        ]
    )
    assert_openai_error(post(served, '{"model": "tiny", "messages": [], "temperature": NaN}'), 400)
    assert_openai_error(post(served, '{"model": "tiny", "temperature": 1e999, "messages": []}'), 400)
    assert_openai_error(post(served, b'{"model": "tin\xff"}'), 400)
    assert_openai_error(
        post(served, '{"model": "tiny", "messages": [{"role": "user", "content": "\\ud800"}]}'), 400
    )
    assert_openai_error(post(served, ""), 400)
    assert_openai_error(post(served, "[1, 2]"), 400)
    assert_openai_error(post(served, "{} {}"), 400)


def test_size_and_encoding_limits(served: Served) -> None:
    big = {**BASE, "messages": [{"role": "user", "content": "x" * 400_000}]}
    assert_openai_error(post(served, big), 413)
    assert_openai_error(post(served, b"\x1f\x8b\x08\x00", **{"Content-Encoding": "gzip"}), 415)
    utf16 = json.dumps(BASE).encode("utf-16")  # JSON may come in UTF-16: it is still JSON
    assert post(served, utf16).status_code == 200


def test_wrong_methods_and_paths_answer_in_openai_shape(served: Served) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    assert_openai_error(httpx.get(served.url + "/chat/completions", headers=headers), 405)
    assert_openai_error(httpx.put(served.url + "/completions", headers=headers), 405)
    assert_openai_error(httpx.post(served.url + "/embeddings", headers=headers, json={}), 404)


def test_a_client_leaving_before_its_body_is_one_log_line(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    host, port = served.url.split("//")[1].split("/")[0].split(":")
    caplog.set_level(logging.INFO)
    uvicorn_log = logging.getLogger("uvicorn")  # uvicorn's loggers do not propagate to the root
    uvicorn_log.addHandler(caplog.handler)
    try:
        _leave_before_the_body(host, int(port), caplog)
    finally:
        uvicorn_log.removeHandler(caplog.handler)
    assert post(served, BASE).status_code == 200  # and the server serves on


def _leave_before_the_body(host: str, port: int, caplog: pytest.LogCaptureFixture) -> None:
    with socket.create_connection((host, port)) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + KEY.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
            + b'{"model": "tiny", '
        )
    wait_until(
        lambda: any("disconnected before" in r.getMessage() for r in caplog.records),
        "the disconnect's log line",
    )
    time.sleep(0.3)  # anything else it would log about it has been logged by now
    lines = [r for r in caplog.records if "disconnected before" in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None
    assert not any(r.exc_info for r in caplog.records)  # no traceback anywhere


def test_the_newest_reference_clients_extras_are_taken(served: Served) -> None:
    """openpipe-art 0.5.23's `Model.openai_client()` sends `return_tokens_as_token_ids`, `nvext` and
    `chat_template_kwargs: {"preserve_thinking": true}` with every request: token ids as vLLM names them,
    Dynamo's extension accepted with no effect, and template switches the model's template does not read
    taken (they cannot change the prompt); one it reads is refused, named."""
    extra = {
        "return_token_ids": True,
        "return_tokens_as_token_ids": True,
        "nvext": {"extra_fields": ["engine_data"]},
        "chat_template_kwargs": {"preserve_thinking": True},
    }
    choice = served.client.chat.completions.create(
        **BASE, logprobs=True, top_logprobs=2, extra_body=extra
    ).choices[0]
    entries = choice.logprobs.content
    assert [e.token for e in entries] == [f"token_id:{t}" for t in choice.token_ids[: len(entries)]]
    assert all(top.token.startswith("token_id:") for e in entries for top in e.top_logprobs)
    plain = served.client.chat.completions.create(**BASE, logprobs=True).choices[0]
    assert not plain.logprobs.content[0].token.startswith("token_id:")
    read = {"chat_template_kwargs": {"add_generation_prompt": False, "preserve_thinking": True}}
    error = assert_openai_error(post(served, {**BASE, **read}), 400, "chat_template_kwargs")
    assert "['add_generation_prompt']" in error["message"] and error["code"] == "unsupported_parameter"


def test_vllm_extras_are_honoured_and_logprobs_stay_raw(served: Served, tiny_model_path: Path) -> None:
    base: dict[str, Any] = dict(model="tiny", messages=USER, max_tokens=6, seed=3)
    greedy = served.client.chat.completions.create(**base, temperature=0).choices[0]
    top1 = served.client.chat.completions.create(**base, extra_body={"top_k": 1, "ignore_eos": True}).choices[
        0
    ]
    assert top1.token_ids[: len(greedy.token_ids)] == greedy.token_ids
    forced = served.client.chat.completions.create(
        **base, logit_bias={"77": 100}, extra_body={"repetition_penalty": 1.2, "min_p": 0.1}
    )
    choice = forced.choices[0]
    assert choice.token_ids == [77] * 6
    expected = hf_logprobs(
        float32_hf(tiny_model_path), forced.model_extra["prompt_token_ids"], choice.token_ids
    )
    assert [e.logprob for e in choice.logprobs.content] == pytest.approx(expected, abs=1e-4)
    stopped = served.client.chat.completions.create(
        **base, logit_bias={"77": 100}, extra_body={"stop_token_ids": [77]}
    ).choices[0]
    assert stopped.token_ids == [77] and stopped.finish_reason == "stop" and stopped.message.content == ""


def test_usage_chunk_only_when_asked(served: Served) -> None:
    def usages(**kwargs: Any) -> tuple[list[Any], int]:
        stream = served.client.chat.completions.create(
            model="tiny", messages=USER, max_tokens=5, seed=2, stream=True, **kwargs
        )
        chunks = list(stream)
        tokens = sum(len((c.model_extra or {}).get("token_ids") or []) for ch in chunks for c in ch.choices)
        return [ch.usage for ch in chunks if ch.usage is not None], tokens

    assert usages()[0] == []
    [usage], tokens = usages(stream_options={"include_usage": True})
    assert usage.completion_tokens == tokens > 0
