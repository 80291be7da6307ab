"""A bounded, seeded fuzz of the OpenAI-compatible server (ours, on a tiny model, over HTTP).

`malformed_requests(seed, count)` makes requests that are wrong in JSON structure, types, sizes, encodings
and headers (and some mutations of valid requests that happen to be valid). Every answer must be a non-5xx,
every error in OpenAI's shape (a stream's error events too), and the server healthy after. A failure prints
the seed and the request; replay with `ART_FUZZ_SEED=<seed> python -m pytest tests/faults/test_server_fuzz.py`
(`ART_FUZZ_COUNT` changes how many requests are sent; default 520).
"""

from __future__ import annotations

import json
import os
import random
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")

from helpers_server import KEY, Served, serve_tiny  # noqa: E402

SEED = int(os.environ.get("ART_FUZZ_SEED", "20240522"))
COUNT = int(os.environ.get("ART_FUZZ_COUNT", "520"))

USER = [{"role": "user", "content": "hi"}]
TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}},
        },
    },
}
FIELDS = [
    "model", "messages", "max_tokens", "max_completion_tokens", "n", "temperature", "top_p", "seed", "stop",
    "stream", "stream_options", "logprobs", "top_logprobs", "presence_penalty", "frequency_penalty",
    "logit_bias", "tools", "tool_choice", "parallel_tool_calls", "response_format", "user", "top_k", "min_p",
    "repetition_penalty", "stop_token_ids", "ignore_eos", "guided_json", "guided_regex", "guided_choice",
    "structured_outputs", "echo", "reasoning_effort", "metadata", "store",
]  # fmt: skip


@dataclass
class Fuzzed:
    """One request to send (what a failure prints, to replay it)."""

    kind: str
    path: str = "/v1/chat/completions"
    method: str = "POST"
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    def describe(self, seed: int, index: int) -> str:
        shown = self.body[:1500] + (b"..." if len(self.body) > 1500 else b"")
        return (
            f"seed={seed} request #{index} ({self.kind}): {self.method} {self.path} headers={self.headers} "
            f"body[{len(self.body)} bytes]={shown!r}"
        )


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    """Any JSON value, biased towards the kinds that break parsers and validators."""
    choices = [
        lambda: None, lambda: rng.choice([True, False]), lambda: rng.randint(-(2**70), 2**70),
        lambda: rng.choice([0, 1, -1, 2**31, 2**63, 2**64, -(2**63) - 1]),
        lambda: rng.choice([0.0, -0.5, 1e308, -1e-308, 3.5, 2.0000001]),
        lambda: rng.choice(["", "16", "yes", "true", "null", "NaN", "\u0000", "é" * 3, "x" * rng.randint(0, 3000)]),
        lambda: [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))] if depth < 4 else [],
        lambda: {rng.choice(["a", "type", "role", ""]): _random_value(rng, depth + 1)} if depth < 4 else {},
    ]  # fmt: skip
    return rng.choice(choices)()


def _valid(rng: random.Random) -> dict[str, Any]:
    return {
        "model": "tiny",
        "messages": list(USER),
        "max_tokens": rng.randint(1, 3),
        "seed": rng.randint(0, 99),
    }


def _random_schema(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.choice(["object", "array", "string", "integer", "enum", "bogus", "ref", "number", "boolean"])
    if depth > 2 or kind in ("string", "integer", "number", "boolean"):
        return {"type": kind if depth <= 2 else "boolean", **({"maxLength": 3} if kind == "string" else {})}
    if kind == "object":
        props = {f"p{i}": _random_schema(rng, depth + 1) for i in range(rng.randint(0, 3))}
        return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
    if kind == "array":
        return {"type": "array", "items": _random_schema(rng, depth + 1), "maxItems": rng.randint(0, 2)}
    if kind == "enum":
        return {"enum": [_random_value(rng, 3) for _ in range(rng.randint(0, 3))]}
    if kind == "ref":
        return {"$ref": rng.choice(["#/nope", "#", "http://x/y"])}
    return {"type": rng.choice(["frob", 5, None, ["string", "nope"]])}


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


def _structure(rng: random.Random) -> Fuzzed:
    good = json.dumps(_valid(rng))
    depth = rng.choice([10, 63, 64, 65, 200, 999, 1001, 5000, 100_000])
    opener, closer = rng.choice([("[", "]"), ('{"a":', "}")])
    variants = [
        good[: rng.randint(0, len(good) - 1)],  # truncated
        good.replace(",", ",,", 1),
        good + rng.choice(["}", "]", " x", "{}", "\n\n{"]),
        rng.choice(["", " ", "null", "0", '"str"', "[]", "[{}]", "true", "{", "}", "{'model': 'tiny'}"]),
        '{"model": "tiny", "messages": ' + opener * depth + closer * depth + "}",
        '{"model": "tiny", "model": 5, "messages": [{"role": "user", "content": "hi"}]}',
        '{"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1' + "0" * rng.choice([4200, 4400, 5001]) + "}",
        good[:-1] + ', "temperature": ' + rng.choice(["NaN", "Infinity", "-Infinity", "1e999", "01", "0x10", "+1", ".5"]) + "}",
        good.replace('"hi"', '"' + rng.choice(["\\ud800", "\\udfff\\ud800", "\\u00", "\\x41", "\\", "\t", "\\u0000"]) + '"'),
    ]  # fmt: skip
    return Fuzzed("json structure", body=rng.choice(variants).encode())


def _types(rng: random.Random) -> Fuzzed:
    body = _valid(rng)
    name = rng.choice(FIELDS)
    body[name] = _random_value(rng)
    if name in ("n", "max_tokens", "max_completion_tokens") and isinstance(body[name], int):
        body["max_tokens"] = 1  # a valid huge n or length must still answer quickly
        if name == "n":
            body[name] = min(abs(body[name]), 200)
    if rng.random() < 0.3:  # a second wrong field
        body[rng.choice(FIELDS)] = _random_value(rng)
    if body.get("n") not in (None, 1) or body.get("stream") is True:
        body["max_tokens"] = 1
    return Fuzzed("types", body=_json(body))


def _messages(rng: random.Random) -> Fuzzed:
    body = _valid(rng)
    message: dict[str, Any] = {
        "role": rng.choice(["user", "assistant", "tool", "system", "developer", "x", 5])
    }
    for key in rng.sample(["content", "tool_calls", "tool_call_id", "name", "refusal", "audio", "extra"], 3):
        message[key] = _random_value(rng)
    if rng.random() < 0.4:
        message["tool_calls"] = [
            {"id": _random_value(rng), "type": rng.choice(["function", "x"]),
             "function": {"name": rng.choice(["add", 5, ""]), "arguments": rng.choice(["{}", "{", 5, {"a": 1}])}}
        ]  # fmt: skip
    body["messages"] = [*USER, message] if rng.random() < 0.8 else [message]
    if rng.random() < 0.3:
        body["tools"] = rng.choice(
            [[TOOL], [_random_value(rng)], TOOL, [{"type": "function", "function": {"name": "a b"}}]]
        )
        body["tool_choice"] = rng.choice(
            [
                "required",
                "auto",
                "none",
                {"type": "function", "function": {"name": "add"}},
                _random_value(rng),
            ]
        )
    return Fuzzed("messages", body=_json(body))


def _constraints(rng: random.Random) -> Fuzzed:
    body = _valid(rng)
    body["max_tokens"] = rng.randint(1, 12)
    choice = rng.randrange(5)
    if choice == 0:
        body["response_format"] = rng.choice([
            {"type": "json_schema", "json_schema": {"name": rng.choice(["r", "", "a b", 5]), "schema": _random_schema(rng)}},
            {"type": rng.choice(["json_object", "text", "xml", None])},
            {"type": "json_schema"}, {"type": "json_schema", "json_schema": {"name": "r", "schema": _random_value(rng)}},
        ])  # fmt: skip
    elif choice == 1:
        body["guided_regex"] = rng.choice(
            ["[a-", "(a|b", "a{2,1}", "\\", "[0-9]{1,3}", "x*", _random_value(rng)]
        )
    elif choice == 2:
        body["guided_choice"] = rng.choice([[], [""], ["a", "b"], ["\\u0000"], _random_value(rng)])
    elif choice == 3:
        body["structured_outputs"] = rng.choice(
            [{}, {"json": _random_schema(rng)}, {"regex": "a", "choice": ["b"]}, _random_value(rng)]
        )
    else:
        body["guided_grammar"] = rng.choice(
            ["start: ", "start: x", 'start: "a" | "b"', "%%%", _random_value(rng)]
        )
    if rng.random() < 0.3:
        body.update(tools=[TOOL], tool_choice=rng.choice(["auto", "required", "none"]))
    return Fuzzed("constraints", body=_json(body))


def _sizes(rng: random.Random) -> Fuzzed:
    body = _valid(rng)
    kind = rng.randrange(6)
    if kind == 0:
        body["model"] = "m" * rng.choice([300, 513, 10_000])
    elif kind == 1:
        body["messages"] = [{"role": "user", "content": "word " * rng.choice([50, 600, 20_000])}]
    elif kind == 2:
        body["messages"] = [{"role": "user", "content": "x"}] * rng.choice([100, 5000])
    elif kind == 3:
        body["stop"] = ["s" * rng.randint(1, 500) for _ in range(rng.choice([5, 300]))]
    elif kind == 4:
        body["logit_bias"] = {
            str(rng.randint(0, 10**12)): rng.uniform(-150, 150) for _ in range(rng.choice([1, 500]))
        }
    else:
        body["stop_token_ids"] = [rng.randint(-5, 10**7) for _ in range(rng.choice([1, 1000]))]
    return Fuzzed("sizes", body=_json(body))


def _encodings(rng: random.Random) -> Fuzzed:
    text = json.dumps(_valid(rng), ensure_ascii=False).replace('"hi"', '"héllo ☃ 🎉"')
    encoded = rng.choice([
        text.encode("utf-16"), text.encode("utf-16-le"), text.encode("utf-32"), b"\xef\xbb\xbf" + text.encode(),
        text.encode("latin-1", errors="replace"), text.encode()[:-3] + b"\xff\xfe}", text.encode().replace(b"h", b"\xc0\xa8", 1),
        text.encode().replace(b"\xc3\xa9", b"\xed\xa0\x80"), bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 200))),
    ])  # fmt: skip
    return Fuzzed("encodings", body=encoded)


def _headers(rng: random.Random) -> Fuzzed:
    fuzzed = Fuzzed("headers", body=_json(_valid(rng)))
    kind = rng.randrange(7)
    if kind == 0:
        fuzzed.headers["Content-Type"] = rng.choice(
            [
                "text/plain",
                "application/x-www-form-urlencoded",
                "",
                "multipart/form-data; boundary=x",
                "application/json; charset=latin-1",
            ]
        )
    elif kind == 1:
        fuzzed.headers["Content-Encoding"] = rng.choice(
            ["gzip", "br", "deflate", "identity", "x-unknown", "gzip, identity"]
        )
    elif kind == 2:
        fuzzed.headers["Authorization"] = rng.choice(
            ["", "Bearer", f"bearer {KEY}", f"Bearer  {KEY}", "Basic eDp5", "Bearer " + "k" * 6000]
        )
    elif kind == 3:
        fuzzed.headers["Accept"] = rng.choice(["text/event-stream", "application/xml", "*/*", ""])
    elif kind == 4:
        fuzzed.method = rng.choice(["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])
    elif kind == 5:
        fuzzed.path = rng.choice(
            [
                "/v1/chat/completions/",
                "/v1/chat",
                "/v1/completions",
                "/v1//chat/completions",
                "/v1/models/x",
                "/%00",
                "/v1/art/x",
            ]
        )
    else:
        fuzzed.headers["X-Junk"] = "j" * rng.randint(1, 7000)
    return fuzzed


def _completions(rng: random.Random) -> Fuzzed:
    body: dict[str, Any] = {"model": "tiny", "max_tokens": rng.randint(1, 3), "seed": 1}
    body["prompt"] = rng.choice([
        "hi", "", [], [1, 2, 3], [[1, 2], "a"], [-1], [10**9], [1.5], [True], [[]], _random_value(rng), ["a"] * 50,
    ])  # fmt: skip
    if rng.random() < 0.5:
        body[
            rng.choice(
                ["echo", "suffix", "best_of", "logprobs", "n", "stream", "add_special_tokens", "messages"]
            )
        ] = _random_value(rng)
    if body.get("stream") is True:
        body["max_tokens"] = 1
    return Fuzzed("completions", path="/v1/completions", body=_json(body))


GENERATORS = [_structure, _types, _messages, _constraints, _sizes, _encodings, _headers, _completions]


def malformed_requests(seed: int, count: int) -> Iterator[Fuzzed]:
    """`count` requests from a seeded generator, cycling through every kind (so each kind gets count/8)."""
    rng = random.Random(seed)
    for i in range(count):
        yield GENERATORS[i % len(GENERATORS)](rng)


@pytest.fixture(scope="module")
def served(tiny_model_path: Path) -> Iterator[Served]:
    s = serve_tiny(tiny_model_path, "tiny", max_body_bytes=2 * 2**20)
    yield s
    s.close()


def _check(response: Any, what: str) -> None:
    assert response.status_code < 500, f"{response.status_code} for {what}: {response.text[:500]}"
    if response.status_code >= 400 and response.request.method != "HEAD":
        error = response.json().get("error")
        assert isinstance(error, dict) and set(error) == {"message", "type", "param", "code"}, what
    if response.status_code == 200 and response.headers.get("content-type", "").startswith(
        "text/event-stream"
    ):
        for line in response.text.splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                event = json.loads(line[6:])
                assert "error" not in event, f"stream error event for {what}: {event}"


def test_malformed_requests_never_get_a_5xx(served: Served) -> None:
    root = served.url.removesuffix("/v1")
    statuses: dict[int, int] = {}
    with httpx.Client(timeout=120) as client:
        for index, fuzzed in enumerate(malformed_requests(SEED, COUNT)):
            what = fuzzed.describe(SEED, index)
            headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json", **fuzzed.headers}
            try:
                response = client.request(
                    fuzzed.method, root + fuzzed.path, content=fuzzed.body, headers=headers
                )
            except httpx.HTTPError as exc:
                pytest.fail(f"{type(exc).__name__}: {exc} for {what}")
            _check(response, what)
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
    assert sum(statuses.values()) == COUNT >= 500
    assert statuses.get(400, 0) > COUNT // 2, statuses  # mostly refused, as they should be
    for cut in (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 900\r\n\r\n{",
        b"POST /v1/ch",
    ):
        host, port = root.split("//")[1].split(":")
        with socket.create_connection((host, int(port))) as sock:  # clients that leave halfway
            sock.sendall(cut)
    healthy = httpx.post(
        served.url + "/chat/completions",
        json={"model": "tiny", "messages": USER, "max_tokens": 3},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=60,
    )
    assert healthy.status_code == 200 and healthy.json()["choices"][0]["token_ids"]
    assert httpx.get(root + "/health", headers={"Authorization": f"Bearer {KEY}"}).json() == {"status": "ok"}
