"""`capture_auto_trajectory` records chat completions sent through httpx and through httpx2 (openai 1.x and
2.x send through httpx, 3.x through httpx2), with async and sync clients, gzip-encoded or not."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType
from typing import Any

import pytest
from helpers_servers import completion_body

import art
from art.auto_trajectory import http_libraries


class _ChatHandler(BaseHTTPRequestHandler):
    """Answers every POST with a chat.completion echoing the last user message (gzip if asked)."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answer = f"echo: {body['messages'][-1]['content']}"
        payload = json.dumps(completion_body(body["model"], answer, [])).encode()
        gzipped = "gzip" in self.headers.get("Accept-Encoding", "")
        if gzipped:
            payload = gzip.compress(payload)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if gzipped:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:  # quiet
        pass


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    server.shutdown()


def test_both_http_libraries_are_hooked_when_installed() -> None:
    names = [library.__name__ for library in http_libraries()]
    assert names[0] == "httpx"
    try:
        import httpx2  # noqa: F401
    except ImportError:
        assert names == ["httpx"]
    else:
        assert names == ["httpx", "httpx2"]


@pytest.mark.parametrize("library", http_libraries(), ids=lambda m: m.__name__)
@pytest.mark.parametrize("encoding", ["identity", "gzip"])
async def test_a_capture_records_the_turns_sent_through_each_library(
    library: ModuleType, encoding: str, url: str
) -> None:
    headers = {"Accept-Encoding": encoding}
    first = {"model": "m", "messages": [{"role": "user", "content": "one"}]}

    async def agent() -> None:
        async with library.AsyncClient(headers=headers) as client:
            (await client.post(url, json=first)).raise_for_status()
        second = {
            "model": "m",
            "messages": [*first["messages"], {"role": "assistant", "content": "echo: one"},
                         {"role": "user", "content": "two"}],
        }  # fmt: skip
        with library.Client(headers=headers) as client:  # a sync client inside the same capture
            client.post(url, json=second).raise_for_status()
        art.auto_trajectory(required=True).reward = 0.5

    trajectory = await art.capture_auto_trajectory(agent())
    messages = trajectory.messages()
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert [m.get("content") for m in messages] == ["one", "echo: one", "two", "echo: two"]
    choices = [m for m in trajectory.messages_and_choices if not isinstance(m, dict)]
    assert len(choices) == 2 and all(c.logprobs is not None for c in choices)  # trainable turns
    assert trajectory.reward == 0.5 and not trajectory.additional_histories


async def test_nothing_is_recorded_outside_a_capture(url: str) -> None:
    art.auto_trajectory()  # no capture: None, and requests pass untouched
    for library in http_libraries():
        async with library.AsyncClient() as client:
            response = await client.post(
                url, json={"model": "m", "messages": [{"role": "user", "content": "x"}]}
            )
        assert response.json()["choices"][0]["message"]["content"] == "echo: x"
    assert art.auto_trajectory() is None


async def test_the_newest_reference_capture_names(url: str) -> None:
    """openpipe-art 0.5.23's `art.trajectory`, `current_trajectory`, `no_capture` and `trajectory_group`:
    the same capture under its new names (recorded as Choices here, not as 0.5.23's raw exchanges)."""
    import asyncio

    import httpx

    async def ask(client: httpx.AsyncClient, text: str) -> None:
        body = {"model": "m", "messages": [{"role": "user", "content": text}]}
        (await client.post(url, json=body)).raise_for_status()

    async def agent(text: str) -> None:
        async with httpx.AsyncClient() as client:
            await ask(client, text)
            with art.no_capture():  # e.g. a judge's call: not part of the trajectory
                assert art.current_trajectory() is None
                await ask(client, "hidden")
        art.current_trajectory(require=True).reward = float(len(text))

    trajectory = await art.trajectory(agent("abc"))
    assert trajectory.reward == 3.0 and [m["content"] for m in trajectory.messages()] == ["abc", "echo: abc"]
    assert art.current_trajectory() is None
    with pytest.raises(RuntimeError, match="No trajectory is active"):
        art.current_trajectory(require=True)
    task = asyncio.ensure_future(asyncio.sleep(0, art.Trajectory()))
    with pytest.raises(TypeError, match="raw coroutine"):
        await art.trajectory(task)  # type: ignore[arg-type]
    await task

    async def fails() -> art.Trajectory:
        raise ValueError("rollout broke")

    shared = art.trajectory(agent("ab"))
    group = await art.trajectory_group(
        [shared, art.trajectory(agent("a")), shared, fails()], return_exceptions=True, metadata={"s": 1}
    )
    assert [t.reward for t in group.trajectories] == [2.0, 1.0, 2.0]  # the shared awaitable ran once
    assert [e.message for e in group.exceptions] == ["rollout broke"] and group.metadata == {"s": 1}
    with pytest.raises(ValueError, match="rollout broke"):
        await art.trajectory_group([art.trajectory(agent("a")), fails()])
