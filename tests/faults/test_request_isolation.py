"""Requests are isolated (issue 41, E1 C1 H1 H2): a client that drops its stream fails no one else, an
abandoned request stops generating, a huge prompt or grammar is refused (naming the limit) without
blocking the event loop, and a body over the limit is refused on every route."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
import httpx
from helpers_server import KEY, USER, Served, serve_tiny
from helpers_wait import DEADLINE_S, until

from art.openai_server import protocol
from art.openai_server.generation import Completions
from art.openai_server.http import ServerThread
from art.openai_server.protocol import MAX_GRAMMAR_CHARS, MAX_GUIDED_CHOICES

HEADERS = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def served(tiny_model_path: Path) -> Iterator[Served]:
    server = serve_tiny(tiny_model_path, "tiny", max_model_len=2048)
    yield server
    server.close()


def client(served: Served, **kwargs: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=served.url.removesuffix("/v1"), headers=HEADERS, **kwargs)


async def test_clients_that_drop_their_streams_fail_no_other_request(served: Served) -> None:
    """50 streaming clients, 25 of which disconnect after their first token, and 50 non-streamed requests
    at the same time: every request that stayed gets its whole answer, no error."""
    stream = {"model": "tiny", "messages": USER, "max_tokens": 48, "ignore_eos": True, "stream": True}

    async def dropper(seed: int) -> None:
        body = {**stream, "seed": seed}
        async with client(served, timeout=120) as c, c.stream("POST", "/v1/chat/completions", json=body) as r:
            assert r.status_code == 200
            async for line in r.aiter_lines():
                if '"token_ids": [' in line and '"token_ids": []' not in line:
                    return  # the first token: leave mid-stream (the connection closes)

    async def streamer(seed: int) -> list[str]:
        problems, chunks, done = [], 0, False
        body = {**stream, "seed": seed}
        async with client(served, timeout=300) as c, c.stream("POST", "/v1/chat/completions", json=body) as r:
            if r.status_code != 200:
                return [f"HTTP {r.status_code}"]
            async for line in r.aiter_lines():
                if line == "data: [DONE]":
                    done = True
                elif line.startswith("data: "):
                    event = json.loads(line[6:])
                    if "error" in event:
                        problems.append(event["error"]["message"])
                    chunks += 1
        return problems + ([] if done and chunks > 2 else [f"stream ended early ({chunks} chunks)"])

    async def plain(seed: int) -> list[str]:
        async with client(served, timeout=300) as c:
            body = {"model": "tiny", "messages": USER, "max_tokens": 24, "ignore_eos": True, "seed": seed}
            r = await c.post("/v1/chat/completions", json=body)
        if r.status_code != 200:
            return [f"HTTP {r.status_code}: {r.text[:300]}"]
        return [] if r.json()["choices"][0]["finish_reason"] == "length" else [r.text[:300]]

    results = await asyncio.gather(
        *(dropper(i) for i in range(25)),
        *(streamer(100 + i) for i in range(25)),
        *(plain(200 + i) for i in range(50)),
    )
    bystander_errors = [p for result in results[25:] for p in (result or [])]
    assert bystander_errors == [], f"{len(bystander_errors)} bystander errors: {bystander_errors[:5]}"
    async with client(served, timeout=30) as c:
        assert (await c.get("/health")).status_code == 200


async def test_abandoned_requests_stop_generating(served: Served) -> None:
    """Non-streamed requests whose clients went away are aborted: 8 requests for 1900 tokens each are left
    once all are generating; the engine stops them within a few steps (counted in decode steps, not
    seconds: far fewer than half of the ~1900 each had left), and the next small request runs alone."""
    scheduler = served.engine._scheduler
    body = {"model": "tiny", "messages": USER, "max_tokens": 1900, "ignore_eos": True}

    async def ask(seed: int) -> None:
        async with client(served, timeout=300) as c:
            await c.post("/v1/chat/completions", json={**body, "seed": seed})

    start = scheduler.steps
    asked = [asyncio.ensure_future(ask(i)) for i in range(8)]
    await until(
        lambda: scheduler.num_running == 8 and scheduler.steps >= start + 5, "the 8 requests to generate"
    )
    for task in asked:
        task.cancel()  # the client goes away: its connection closes
    await asyncio.gather(*asked, return_exceptions=True)
    left = scheduler.steps
    await until(lambda: scheduler.num_running == 0, "the abandoned sequences to stop", timeout=120)
    assert scheduler.steps - left < (1900 - (left - start)) / 2, (
        f"the abandoned sequences ran {scheduler.steps - left} more steps after their clients left"
    )
    async with client(served, timeout=60) as c:
        r = await c.post("/v1/chat/completions", json={"model": "tiny", "messages": USER, "max_tokens": 4})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] <= 4


async def answered_while_held(
    served: Served, monkeypatch: pytest.MonkeyPatch, where: Any, name: str, work: Any
) -> Any:
    """Run `work` (a coroutine) with `where.name`, a step that request's handling runs off the event loop,
    held on its first call until /health has answered: were that step on the event loop, /health could
    not answer while it is held, and this fails (after 20 s). The step's result is unchanged."""
    entered, release = threading.Event(), threading.Event()
    real = getattr(where, name)

    def held(*args: Any, **kwargs: Any) -> Any:
        if not entered.is_set():
            entered.set()
            release.wait(DEADLINE_S)
        return real(*args, **kwargs)

    monkeypatch.setattr(where, name, held)
    task = asyncio.ensure_future(work)
    try:
        assert await asyncio.to_thread(entered.wait, DEADLINE_S), f"{name} was never called"
        async with client(served, timeout=20) as c:
            try:
                health = await c.get("/health")
            except httpx.TimeoutException:
                pytest.fail(f"/health did not answer while {name} ran: it runs on the event loop")
        assert health.status_code == 200
    finally:
        release.set()
        monkeypatch.setattr(where, name, real)
    return await task


def assert_no_insides(body: dict[str, Any]) -> None:
    message = body["error"]["message"]
    for leak in ("backtrace", ".rs:", ".py", "/root/", "/home/", "site-packages", "Traceback"):
        assert leak not in message, f"the error shows the server's insides ({leak!r}): {message[:500]}"


async def test_a_10_mb_prompt_is_refused_naming_the_limit_while_health_answers(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def huge() -> httpx.Response:
        async with client(served, timeout=120) as c:
            messages = [{"role": "user", "content": "a " * 5_000_000}]  # 10 MB
            return await c.post("/v1/chat/completions", json={"model": "tiny", "messages": messages})

    # the size check comes after the prompt's characters are counted, in the same step
    response = await answered_while_held(served, monkeypatch, Completions, "check_prompt_size", huge())
    assert response.status_code == 413, response.text[:300]
    error = response.json()["error"]
    assert error["code"] == "prompt_too_large" and error["param"] == "messages"
    assert re.search(
        r"The prompt has 100000\d\d characters; this server accepts at most \d+ \(max_prompt_chars",
        error["message"],
    ), error["message"]

    async def huge_completion() -> httpx.Response:
        async with client(served, timeout=120) as c:
            return await c.post("/v1/completions", json={"model": "tiny", "prompt": "a " * 5_000_000})

    response = await answered_while_held(
        served, monkeypatch, Completions, "check_prompt_size", huge_completion()
    )
    assert response.status_code == 413 and response.json()["error"]["param"] == "prompt"


async def test_huge_or_broken_grammars_are_refused_naming_the_limit_without_insides(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def ask(extra: dict[str, Any]) -> httpx.Response:
        async with client(served, timeout=120) as c:
            body = {"model": "tiny", "messages": USER, "max_tokens": 4, **extra}
            return await c.post("/v1/chat/completions", json=body)

    response = await answered_while_held(
        served,
        monkeypatch,
        protocol,
        "check_grammar_limits",
        ask({"guided_choice": [f"choice number {i}" for i in range(100_000)]}),
    )
    assert response.status_code == 400, response.text[:300]
    body = response.json()
    assert body["error"]["param"] == "guided_choice" and body["error"]["code"] == "grammar_too_large"
    assert f"at most {MAX_GUIDED_CHOICES} (MAX_GUIDED_CHOICES)" in body["error"]["message"]
    assert_no_insides(body)

    response = await ask({"guided_regex": "a" * (MAX_GRAMMAR_CHARS + 1)})
    assert response.status_code == 400 and "MAX_GRAMMAR_CHARS" in response.json()["error"]["message"]

    # What the grammar library says about a broken grammar reaches the client without its insides.
    for broken in ({"guided_grammar": "start: ((("}, {"guided_regex": "(a"}, {"guided_json": {"type": 5}}):
        response = await ask(broken)
        assert response.status_code == 400, response.text[:300]
        assert_no_insides(response.json())
    # The largest accepted choice list still works.
    response = await ask({"guided_choice": [f"c{i}" for i in range(MAX_GUIDED_CHOICES)]})
    assert response.status_code == 200 and response.json()["choices"][0]["message"]["content"].startswith("c")


async def test_a_body_over_the_limit_is_refused_on_every_route(tmp_path: Path) -> None:
    """`art serve --max-body-mib 1`: each route of the app, the OpenAI-compatible ones included, answers
    413 to a body over 1 MiB, declared or sent in chunks."""
    from art.hub.app import ServeConfig, build_app

    limit = 2**20
    app, _ = build_app(ServeConfig(path=tmp_path / "art", max_body_bytes=limit), api_key=KEY)
    server = ServerThread(app)
    url = server.start().removesuffix("/v1")
    try:

        def flat(routes: list[Any]) -> list[Any]:  # FastAPI keeps an included router whole: look inside
            inner = [flat(r.original_router.routes) if hasattr(r, "original_router") else [r] for r in routes]
            return [r for rs in inner for r in rs]

        every = flat([*app.routes, *app.state.art_api.routes])
        routes = [
            (method, route.path)
            for route in every
            for method in sorted(getattr(route, "methods", None) or ())
            if method != "HEAD"
        ]
        assert ("POST", "/v1/chat/completions") in routes and ("POST", "/v1/completions") in routes
        assert len(routes) >= 15, routes
        over = b"{" + b" " * limit + b"}"
        async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=60) as c:
            for method, path in routes:
                concrete = path.replace("{project}", "p").replace("{name}", "m").replace("{step}", "1")
                concrete = concrete.replace("{job_id}", "job-" + "0" * 24)
                r = await c.request(method, concrete, content=over)
                assert r.status_code == 413, (method, path, r.status_code, r.text[:200])
                assert str(limit) in r.json()["error"]["message"], r.text

            async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
                for _ in range(2 * limit // 65536):
                    yield b" " * 65536

            for path in ("/v1/chat/completions", "/v1/completions", "/v1/art/models"):
                r = await c.post(path, content=chunks())
                assert r.status_code == 413, (path, r.status_code, r.text[:200])
            assert (await c.get("/health")).status_code == 200
    finally:
        server.close()
