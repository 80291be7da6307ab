"""The OpenAI-compatible server, driven by the official `openai` clients (sync and async) over HTTP."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from helpers_server import KEY, USER, Served, hf_logprobs, serve_tiny  # noqa: E402
from helpers_server import float32_hf as _float32_hf  # noqa: E402
from helpers_tools import TOOLS  # noqa: E402
from helpers_wait import DEADLINE_S, until, wait_until  # noqa: E402

from art.engines.base import GenerateOutput, GenerateRequest  # noqa: E402
from art.openai_server.http import ServerThread, create_app  # noqa: E402


@pytest.fixture(scope="module")
def served(tiny_model_path: Path) -> Iterator[Served]:
    s = serve_tiny(tiny_model_path, "tiny")
    yield s
    s.close()


# ---- plain chat, logprobs, seeds ----


def test_health_and_models(served: Served) -> None:
    assert httpx.get(served.url[:-3] + "/health", headers={"Authorization": f"Bearer {KEY}"}).json() == {
        "status": "ok"
    }
    assert [m.id for m in served.client.models.list().data] == ["tiny"]


def test_plain_chat_returns_token_ids_and_logprobs(served: Served) -> None:
    response = served.client.chat.completions.create(model="tiny", messages=USER, max_tokens=12, seed=1)
    choice = response.choices[0]
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.finish_reason in ("length", "stop")
    token_ids = choice.token_ids  # type: ignore[attr-defined]
    assert len(token_ids) == len(choice.logprobs.content) == response.usage.completion_tokens
    assert choice.model_extra["checkpoint_step"] is None
    prompt_ids = response.model_extra["prompt_token_ids"]
    assert prompt_ids == served.engine.chat_template.render_ids(USER, add_generation_prompt=True)
    assert response.usage.prompt_tokens == len(prompt_ids)
    assert all(entry.top_logprobs == [] for entry in choice.logprobs.content)
    visible = [t for t in token_ids if t not in served.engine._scheduler._stop_ids.tolist()]
    assert choice.message.content == served.engine.tokenizer.decode(visible, skip_special_tokens=True)


def test_logprobs_and_token_ids_match_a_separate_hf_forward(served: Served, tiny_model_path: Path) -> None:
    response = served.client.chat.completions.create(
        model="tiny", messages=USER, max_tokens=16, seed=3, logprobs=True, top_logprobs=3
    )
    choice = response.choices[0]
    reported = [e.logprob for e in choice.logprobs.content]
    expected = hf_logprobs(
        _float32_hf(tiny_model_path), response.model_extra["prompt_token_ids"], choice.token_ids
    )
    assert reported == pytest.approx(expected, abs=1e-3)
    for entry in choice.logprobs.content:
        assert len(entry.top_logprobs) == 3 and entry.top_logprobs[0].logprob >= entry.logprob - 1e-6


async def test_seed_reproducibility(served: Served) -> None:
    client = served.aclient()
    first = await client.chat.completions.create(model="tiny", messages=USER, max_tokens=10, seed=11)
    again = await client.chat.completions.create(model="tiny", messages=USER, max_tokens=10, seed=11)
    other = await client.chat.completions.create(model="tiny", messages=USER, max_tokens=10, seed=12)
    assert first.choices[0].token_ids == again.choices[0].token_ids
    assert first.choices[0].message.content == again.choices[0].message.content
    assert first.choices[0].token_ids != other.choices[0].token_ids


async def test_32_concurrent_requests_each_equal_their_solo_result(served: Served) -> None:
    client = served.aclient()

    def request(i: int) -> Any:
        messages = [{"role": "user", "content": f"Question number {i}: what is {i} plus {i}?"}]
        return client.chat.completions.create(
            model="tiny", messages=messages, max_tokens=8 + i % 9, seed=100 + i, temperature=[1.0, 0.8][i % 2]
        )

    solo = [await request(i) for i in range(32)]
    together = await asyncio.gather(*(request(i) for i in range(32)))
    for s, t in zip(solo, together, strict=True):
        assert s.choices[0].token_ids == t.choices[0].token_ids
        assert s.choices[0].message.content == t.choices[0].message.content
        assert [e.logprob for e in s.choices[0].logprobs.content] == pytest.approx(
            [e.logprob for e in t.choices[0].logprobs.content], abs=1e-4
        )


def _assemble(stream: Any) -> dict[str, Any]:
    """A non-streamed-like view of a streamed reply."""
    out: dict[str, Any] = {"content": "", "token_ids": [], "logprobs": [], "tool_calls": {}, "usage": None}
    for chunk in stream:
        if chunk.usage is not None:
            out["usage"] = chunk.usage
        for choice in chunk.choices:
            out["content"] += choice.delta.content or ""
            out["token_ids"] += (choice.model_extra or {}).get("token_ids") or []
            if choice.logprobs and choice.logprobs.content:
                out["logprobs"] += [e.logprob for e in choice.logprobs.content]
            for call in choice.delta.tool_calls or []:  # a call's name first, then its arguments in pieces
                name, arguments = out["tool_calls"].get(call.index, (None, ""))
                out["tool_calls"][call.index] = (
                    call.function.name or name,
                    arguments + (call.function.arguments or ""),
                )
            if choice.finish_reason:
                out["finish_reason"] = choice.finish_reason
    return out


def test_streamed_reply_equals_non_streamed(served: Served) -> None:
    kwargs: dict[str, Any] = dict(model="tiny", messages=USER, max_tokens=20, seed=5)
    full = served.client.chat.completions.create(**kwargs)
    streamed = _assemble(
        served.client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True})
    )
    choice = full.choices[0]
    assert streamed["content"] == choice.message.content
    assert streamed["token_ids"] == choice.token_ids
    # The second request restores the first one's prompt from the engine's prefix cache: the same logits
    # along another path, equal to float32 rounding.
    assert streamed["logprobs"] == pytest.approx([e.logprob for e in choice.logprobs.content], abs=1e-5)
    assert streamed["finish_reason"] == choice.finish_reason
    assert streamed["usage"].completion_tokens == full.usage.completion_tokens


def test_n_choices_stop_strings_and_max_completion_tokens(served: Served) -> None:
    one = served.client.chat.completions.create(model="tiny", messages=USER, max_completion_tokens=15, seed=9)
    three = served.client.chat.completions.create(
        model="tiny", messages=USER, max_completion_tokens=15, seed=9, n=3
    )
    assert len(three.choices) == 3 and [c.index for c in three.choices] == [0, 1, 2]
    assert three.choices[0].token_ids == one.choices[0].token_ids
    assert len({tuple(c.token_ids) for c in three.choices}) == 3
    assert len(one.choices[0].token_ids) <= 15
    text = one.choices[0].message.content
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    if stop.strip():
        cut = served.client.chat.completions.create(
            model="tiny", messages=USER, max_tokens=15, seed=9, stop=[stop]
        )
        assert cut.choices[0].message.content == text[: text.index(stop)]
        assert cut.choices[0].finish_reason == "stop"
        assert len(cut.choices[0].token_ids) == len(cut.choices[0].logprobs.content)


# ---- tools ----


class ScriptedEngine:
    """An Engine that replies with scripted text (a tiny random model cannot be made to call tools)."""

    def __init__(self, real: Any, replies: list[str]) -> None:
        self.real = real
        self.base_model_name = real.base_model_name
        self.tokenizer = real.tokenizer
        self.chat_template = real.chat_template
        self.max_model_len = real.max_model_len
        self.replies = deque(replies)
        self.prompts: list[list[int]] = []

    def model_names(self) -> list[str]:
        return [self.base_model_name]

    async def generate(self, request: GenerateRequest) -> AsyncIterator[GenerateOutput]:
        self.prompts.append(list(request.prompt_token_ids))
        ids = self.tokenizer.encode(self.replies.popleft(), add_special_tokens=False)
        ids.append(self.tokenizer.convert_tokens_to_ids("<|im_end|>"))
        for i, token in enumerate(ids):
            reason = "stop" if i == len(ids) - 1 else None
            yield GenerateOutput([token], [-0.25], None, reason, request.model, 4)


CALL_TEXT = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'


@pytest.fixture
def scripted(served: Served) -> Iterator[tuple[ScriptedEngine, Any]]:
    engine = ScriptedEngine(served.engine, [])
    server = ServerThread(create_app(engine, api_key=KEY))
    url = server.start()
    yield engine, openai.OpenAI(base_url=url, api_key=KEY, max_retries=0)
    server.stop()


def test_scripted_tool_loop_over_two_turns(scripted: tuple[ScriptedEngine, Any]) -> None:
    engine, client = scripted
    engine.replies.extend(["I will add.\n" + CALL_TEXT, "The sum is 5."])
    messages: list[Any] = [{"role": "system", "content": "You add."}, {"role": "user", "content": "2+3?"}]
    first = client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "I will add."
    (call,) = choice.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function" and call.function.name == "add"
    assert json.loads(call.function.arguments) == {"a": 2, "b": 3}
    assert choice.model_extra["checkpoint_step"] == 4
    first_prompt = engine.tokenizer.decode(engine.prompts[0])
    assert "<tools>" in first_prompt and '"name": "add"' in first_prompt

    messages.append(choice.message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps({"result": 5})})
    second = client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS)
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "The sum is 5." and not second.choices[0].message.tool_calls
    second_prompt = engine.tokenizer.decode(engine.prompts[1])
    assert '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>' in second_prompt
    assert '<tool_response>\n{"result": 5}\n</tool_response>' in second_prompt
    # The sampled reply is exactly what the template writes back for this turn (engine and trainer agree).
    assert engine.tokenizer.decode(first.choices[0].token_ids) in second_prompt


def test_several_calls_streamed_equal_non_streamed(scripted: tuple[ScriptedEngine, Any]) -> None:
    engine, client = scripted
    reply = CALL_TEXT + "\n" + CALL_TEXT.replace('"a": 2', '"a": 7')
    engine.replies.extend([reply, reply])
    full = client.chat.completions.create(model="tiny", messages=USER, tools=TOOLS)
    streamed = _assemble(
        client.chat.completions.create(model="tiny", messages=USER, tools=TOOLS, stream=True)
    )
    calls = full.choices[0].message.tool_calls
    assert [json.loads(c.function.arguments)["a"] for c in calls] == [2, 7]
    assert streamed["tool_calls"] == {i: (c.function.name, c.function.arguments) for i, c in enumerate(calls)}
    assert streamed["content"] == "" and full.choices[0].message.content is None
    assert streamed["finish_reason"] == full.choices[0].finish_reason == "tool_calls"


def test_a_call_is_streamed_as_soon_as_its_block_closes(served: Served) -> None:
    """Free text: each call goes out whole once its `</tool_call>` is written, not all at the end (they
    used to arrive in the last chunk, after every token of the reply)."""
    second = CALL_TEXT.replace('"a": 2', '"a": 7')
    engine = PacedEngine(served.engine, CALL_TEXT + "\n" + second, step=0.01)
    server = ServerThread(create_app(engine, api_key=KEY, stream_interval=0))
    try:
        client = openai.OpenAI(base_url=server.start(), api_key=KEY, max_retries=0)
        chunks = list(client.chat.completions.create(model="tiny", messages=USER, tools=TOOLS, stream=True))
    finally:
        server.stop()
    tokens_before, first_call_at, calls = 0, None, []
    for chunk in chunks:
        for choice in chunk.choices:
            ids = (choice.model_extra or {}).get("token_ids") or []
            for call in choice.delta.tool_calls or []:
                calls.append((call.index, call.function.name, json.loads(call.function.arguments)["a"]))
                if first_call_at is None:
                    first_call_at = tokens_before + len(ids)
            tokens_before += len(ids)
    assert calls == [(0, "add", 2), (1, "add", 7)]
    first_block = len(engine.tokenizer.encode(CALL_TEXT, add_special_tokens=False))
    assert first_call_at is not None and first_call_at <= first_block + 1 < tokens_before


class PacedEngine(ScriptedEngine):
    """A ScriptedEngine that waits `step` seconds before each token, and before token i of `gates` until
    that event is set (at most `DEADLINE_S`; `released[i]` says whether it was set in time)."""

    def __init__(
        self, real: Any, reply: str, step: float, gates: dict[int, threading.Event] | None = None
    ) -> None:
        super().__init__(real, [reply] * 4)
        self.step, self.gates = step, gates or {}
        self.released: dict[int, bool] = {}

    async def generate(self, request: GenerateRequest) -> AsyncIterator[GenerateOutput]:
        i = 0
        async for out in super().generate(request):
            gate = self.gates.get(i)
            if gate is None:
                await asyncio.sleep(self.step)
            else:
                self.released[i] = await asyncio.to_thread(gate.wait, DEADLINE_S)
            i += 1
            yield out


def _timed_token_chunks(url: str) -> tuple[list[tuple[float, list[int]]], dict[str, Any]]:
    """(seconds since the first token chunk, its token ids) per token chunk of one streamed reply, and the
    reply assembled; the final chunk (finish reason only) is left out."""
    client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0)
    timed: list[tuple[float, list[int]]] = []
    chunks = []
    for chunk in client.chat.completions.create(model="tiny", messages=USER, stream=True):
        chunks.append(chunk)
        ids = (chunk.choices[0].model_extra or {}).get("token_ids") if chunk.choices else None
        if ids:
            timed.append((time.perf_counter(), ids))
    return [(t - timed[0][0], ids) for t, ids in timed], _assemble(chunks)


@pytest.mark.parametrize("interval", [0.0, 0.15])
def test_stream_interval_merges_tokens_without_delaying_the_first(served: Served, interval: float) -> None:
    reply = "one two three four five six seven eight nine ten eleven twelve"
    engine = PacedEngine(served.engine, reply, step=0.03)
    server = ServerThread(create_app(engine, api_key=KEY, stream_interval=interval))
    url = server.start()
    try:
        full = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0).chat.completions.create(
            model="tiny", messages=USER
        )
        timed, streamed = _timed_token_chunks(url)
    finally:
        server.stop()
    assert streamed["content"] == full.choices[0].message.content == reply
    assert streamed["token_ids"] == full.choices[0].token_ids
    assert len(timed[0][1]) == 1  # the first token goes out alone, at once
    tokens = len(full.choices[0].token_ids)
    if interval == 0:
        assert [len(ids) for _, ids in timed] == [1] * tokens
    else:  # ~5 tokens come in each 0.15 s: a handful of chunks (times seen by a client can bunch up)
        assert len(timed) <= tokens // 2


def test_held_tokens_go_out_when_the_engine_stalls(served: Served) -> None:
    """Tokens 1-2 come right after the first, so they are held (the interval is 0.1 s); then the engine
    stalls before token 3 until the client has received three tokens. Only the interval's timer can send
    the held ones during the stall: the stall ends in time only if it does."""
    stall = threading.Event()
    engine = PacedEngine(served.engine, "alpha beta gamma delta", step=0.0, gates={3: stall})
    server = ServerThread(create_app(engine, api_key=KEY, stream_interval=0.1))
    url = server.start()
    chunks: list[list[int]] = []
    pieces: list[Any] = []
    try:
        client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0)
        for chunk in client.chat.completions.create(model="tiny", messages=USER, stream=True):
            pieces.append(chunk)
            ids = (chunk.choices[0].model_extra or {}).get("token_ids") if chunk.choices else None
            if ids:
                chunks.append(ids)
                if sum(len(c) for c in chunks) >= 3:
                    stall.set()
    finally:
        stall.set()
        server.stop()
    assert _assemble(pieces)["content"] == "alpha beta gamma delta"
    assert engine.released == {3: True}, "the held tokens were not sent while the engine stalled"
    assert len(chunks[0]) == 1  # the first token went out alone, at once


def test_many_open_streams_share_a_chunk_budget(served: Served) -> None:
    """`stream_chunk_rate` bounds the token chunks per second over all open streamed choices: one choice
    alone, at 100 chunks/s, may send every 1/100 s, so each of its tokens (one per 0.06 s) goes at once;
    four open choices each wait 4/100 = 0.04 s, so tokens that come together (here all at once) go out
    a few per chunk (the first still at once). `stream_interval` is 0: only the rate merges tokens."""
    reply = "one two three four five six seven eight nine ten eleven twelve"
    engine = PacedEngine(served.engine, reply, step=0.06)
    engine.replies.extend([reply] * 4)
    engine.replies.extend([reply] * 2)
    app = create_app(engine, api_key=KEY, stream_interval=0.0, stream_chunk_rate=100.0)
    server = ServerThread(app)
    url = server.start()
    client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0)
    try:
        per_choice: list[list[list[int]]] = [[] for _ in range(5)]  # choice -> its token chunks' ids
        for n, offset, step in ((1, 0, 0.06), (4, 1, 0.0)):
            engine.step = step
            for chunk in client.chat.completions.create(model="tiny", messages=USER, stream=True, n=n):
                for choice in chunk.choices:
                    ids = (choice.model_extra or {}).get("token_ids")
                    if ids:
                        per_choice[offset + choice.index].append(ids)
        with client.chat.completions.create(model="tiny", messages=USER, stream=True, n=2) as stream:
            next(iter(stream))  # a client that leaves early
        wait_until(lambda: app.state.chat.open_streams == 0, "the streams to leave the budget")
    finally:
        server.stop()
    alone, crowded = per_choice[0], per_choice[1:]
    tokens = sum(len(ids) for ids in alone)
    assert [len(ids) for ids in alone] == [1] * tokens
    for chunks in crowded:
        assert [t for ids in chunks for t in ids] == [t for ids in alone for t in ids]  # nothing lost
        assert len(chunks[0]) == 1 and len(chunks) <= tokens // 2


def test_a_chunk_budget_must_be_positive(served: Served) -> None:
    with pytest.raises(ValueError, match="stream_chunk_rate"):
        create_app(served.engine, api_key=KEY, stream_chunk_rate=0)


def test_negative_stream_interval_is_refused(served: Served) -> None:
    with pytest.raises(ValueError, match="stream_interval"):
        create_app(served.engine, api_key=KEY, stream_interval=-1)


def test_unparseable_tool_text_stays_content_and_tool_choice_none(
    scripted: tuple[ScriptedEngine, Any],
) -> None:
    engine, client = scripted
    broken = '<tool_call>{"name": "add", "arguments": {"a": </tool_call>'
    engine.replies.extend([broken, CALL_TEXT])
    response = client.chat.completions.create(model="tiny", messages=USER, tools=TOOLS)
    assert response.choices[0].message.content == broken
    assert response.choices[0].finish_reason == "stop" and not response.choices[0].message.tool_calls
    none = client.chat.completions.create(model="tiny", messages=USER, tools=TOOLS, tool_choice="none")
    assert none.choices[0].message.content == CALL_TEXT and none.choices[0].finish_reason == "stop"
    assert "<tools>" in engine.tokenizer.decode(engine.prompts[-1])  # still rendered (see chat_completions)


def test_real_engine_with_tools_and_content_parts(served: Served) -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Add "}, {"type": "text", "text": "2 and 3"}]}
    ]
    response = served.client.chat.completions.create(
        model="tiny", messages=messages, tools=TOOLS, max_tokens=10, seed=2
    )
    assert response.choices[0].finish_reason in ("stop", "length", "tool_calls")
    prompt = served.engine.tokenizer.decode(response.model_extra["prompt_token_ids"])
    assert "Add 2 and 3" in prompt and "<tools>" in prompt


# ---- errors ----


@pytest.mark.parametrize(
    ("body", "param", "fragment"),
    [
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role", "wizard"),
        (
            {"messages": USER, "tools": [{"type": "function", "function": {"name": "bad name!"}}]},
            "tools[0].function.name",
            "name",
        ),
        ({"messages": USER, "tools": [{"type": "retrieval"}]}, "tools[0].type", "function"),
        ({"messages": USER, "max_tokens": 0}, "max_tokens", "max_tokens"),
        ({"messages": USER, "max_completion_tokens": -3}, "max_completion_tokens", "max_completion_tokens"),
        ({"messages": USER, "temperature": 3.5}, "temperature", "temperature"),
        # "required" is supported (tests/service/test_structured_outputs.py), but only with tools, as OpenAI says
        ({"messages": USER, "tool_choice": "required"}, "tool_choice", "only allowed when 'tools'"),
        (
            {"messages": [{"role": "user", "content": "word " * 600}]},
            "messages",
            "maximum context length is 512",
        ),
    ],
)
def test_bad_requests_get_400_in_openai_shape(
    served: Served, body: dict[str, Any], param: str, fragment: str
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        served.client.chat.completions.create(model="tiny", **body)
    error = info.value.body
    assert info.value.status_code == 400
    assert error["param"] == param and fragment in error["message"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"


def test_malformed_json_unknown_model_and_paths(served: Served) -> None:
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    response = httpx.post(
        served.url + "/chat/completions", content=b'{"model": "tiny", "messages": [', headers=headers
    )
    assert response.status_code == 400 and "not valid JSON" in response.json()["error"]["message"]
    with pytest.raises(openai.NotFoundError) as info:
        served.client.chat.completions.create(model="nope", messages=USER)
    assert info.value.body["param"] == "model" and info.value.body["code"] == "model_not_found"
    missing = httpx.get(served.url + "/nothing", headers=headers)
    assert missing.status_code == 404 and "error" in missing.json()


@pytest.mark.parametrize("key", [None, "wrong"])
def test_wrong_or_missing_key_gets_401_on_every_route(served: Served, key: str | None) -> None:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    for method, path in [
        ("GET", "/v1/models"),
        ("GET", "/health"),
        ("POST", "/v1/chat/completions"),
        ("GET", "/x"),
    ]:
        response = httpx.request(method, served.url[:-3] + path, headers=headers, json={"model": "tiny"})
        assert response.status_code == 401, path
        assert response.json()["error"]["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=served.url, api_key="wrong", max_retries=0).models.list()


async def test_bad_requests_do_not_disturb_requests_in_flight(served: Served) -> None:
    client = served.aclient()
    kwargs: dict[str, Any] = dict(model="tiny", messages=USER, max_tokens=60, seed=21)
    solo = await client.chat.completions.create(**kwargs)
    in_flight = asyncio.create_task(client.chat.completions.create(**kwargs))
    for body in ({"messages": [{"role": "wizard", "content": "x"}]}, {"messages": USER, "max_tokens": 0}):
        with pytest.raises(openai.BadRequestError):
            await client.chat.completions.create(model="tiny", **body)
    with pytest.raises(openai.NotFoundError):
        await client.chat.completions.create(model="nope", messages=USER)
    assert (await in_flight).choices[0].token_ids == solo.choices[0].token_ids


# ---- adapters, pause/resume, Qwen2 ----


def test_adapter_selection_and_peft_agreement(
    served: Served, adapter_paths_for_server: list[Path], tiny_model_path: Path
) -> None:
    from peft import PeftModel

    engine = served.engine
    engine.load_adapter("tiny@1", adapter_paths_for_server[0])
    engine.load_adapter("tiny@2", adapter_paths_for_server[1])
    engine.set_alias("tiny-latest", "tiny@2")
    try:
        assert {m.id for m in served.client.models.list().data} == {"tiny", "tiny@1", "tiny@2", "tiny-latest"}
        replies = {
            name: served.client.chat.completions.create(model=name, messages=USER, max_tokens=12, seed=8)
            for name in ("tiny", "tiny@1", "tiny@2", "tiny-latest")
        }
        ids = {name: tuple(r.choices[0].token_ids) for name, r in replies.items()}
        assert len({ids["tiny"], ids["tiny@1"], ids["tiny@2"]}) == 3
        assert ids["tiny-latest"] == ids["tiny@2"] and replies["tiny-latest"].model == "tiny@2"
        chunks = list(
            served.client.chat.completions.create(
                model="tiny-latest", messages=USER, max_tokens=3, stream=True
            )
        )
        assert {c.model for c in chunks} == {"tiny@2"}
        assert replies["tiny@1"].choices[0].model_extra["checkpoint_step"] == 1
        assert replies["tiny"].choices[0].model_extra["checkpoint_step"] is None

        reply = replies["tiny@1"]
        peft_model = PeftModel.from_pretrained(
            _float32_hf(tiny_model_path), str(adapter_paths_for_server[0])
        ).eval()
        expected = hf_logprobs(peft_model, reply.model_extra["prompt_token_ids"], reply.choices[0].token_ids)
        assert [e.logprob for e in reply.choices[0].logprobs.content] == pytest.approx(expected, abs=1e-3)
    finally:
        engine.unload_adapter("tiny@1")
        engine.unload_adapter("tiny@2")


@pytest.fixture(scope="module")
def adapter_paths_for_server(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    from art.engines.torch.random_adapter import save_random_adapter

    root = tmp_path_factory.mktemp("server-adapters")
    return [
        save_random_adapter(tiny_model_path, root / "one", seed=3),
        save_random_adapter(tiny_model_path, root / "two", seed=4),
    ]


async def test_pause_holds_http_requests_until_resume(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests that reach a paused engine are held there: all three are queued in the engine, and the
    worker passes them by (two jobs run, one after the other, while paused: an unpaused worker would have
    prefilled them right after the first) with no prefill and no decode step, until `resume`."""
    client = served.aclient()
    kwargs: dict[str, Any] = dict(model="tiny", messages=USER, max_tokens=8, seed=31)
    expected = (await client.chat.completions.create(**kwargs)).choices[0].token_ids
    scheduler = served.engine._scheduler
    submitted: list[Any] = []
    submit = scheduler.submit

    def counted(seq: Any) -> None:
        submit(seq)
        submitted.append(seq)

    monkeypatch.setattr(scheduler, "submit", counted)
    await served.engine.pause()
    try:
        tasks = [asyncio.create_task(client.chat.completions.create(**kwargs)) for _ in range(3)]
        await until(lambda: len(submitted) == 3, "the three requests to reach the engine")
        steps, prefilled = scheduler.steps, scheduler.prefill_tokens
        for _ in range(2):
            await served.engine.run(lambda: None)
        assert (scheduler.steps, scheduler.prefill_tokens, scheduler.num_running) == (steps, prefilled, 0)
        assert not any(s.generated for s in submitted) and not any(t.done() for t in tasks)
    finally:
        await served.engine.resume()
    for reply in await asyncio.wait_for(asyncio.gather(*tasks), 60):
        assert reply.choices[0].token_ids == expected


def test_qwen2_tiny_model_serves(tiny_qwen2_path: Path) -> None:
    s = serve_tiny(tiny_qwen2_path, "tiny-qwen2")
    try:
        reply = s.client.chat.completions.create(model="tiny-qwen2", messages=USER, max_tokens=10, seed=1)
        expected = hf_logprobs(
            _float32_hf(tiny_qwen2_path), reply.model_extra["prompt_token_ids"], reply.choices[0].token_ids
        )
        assert [e.logprob for e in reply.choices[0].logprobs.content] == pytest.approx(expected, abs=1e-3)
        assert (
            _assemble(
                s.client.chat.completions.create(
                    model="tiny-qwen2", messages=USER, max_tokens=10, seed=1, stream=True
                )
            )["token_ids"]
            == reply.choices[0].token_ids
        )
    finally:
        s.close()
