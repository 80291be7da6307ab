"""A scripted OpenAI-compatible server (FastAPI + uvicorn in a thread on 127.0.0.1) for rollout tests.

A test sets `server.script`, a function from the request body (a dict: model, messages, tools, ...) to
the assistant message to send back: `{"content": "..."}` and/or `{"tool_calls": [(name, args_dict)]}`.
Responses are real chat.completion objects whose choice carries logprobs (and token ids), so the
rollouts run through the official `openai.AsyncOpenAI` client exactly as against a real engine.
"""

import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from helpers_servers import completion_body

Script = Callable[[dict[str, Any]], dict[str, Any]]


class ScriptedServer:
    """Serves POST /v1/chat/completions from `script`; records every request body in `requests`."""

    def __init__(self) -> None:
        from fastapi import FastAPI, Request

        self.script: Script = lambda body: {"content": "hello"}
        self.requests: list[dict[str, Any]] = []
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request) -> dict[str, Any]:
            body = await request.json()
            self.requests.append(body)
            return self._completion(body, self.script(body))

        self.app = app

    def _completion(self, body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        content = reply.get("content")
        calls = [
            {
                "id": f"call_{uuid.uuid4().hex[:8]}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for name, args in reply.get("tool_calls", [])
        ]
        return completion_body(body.get("model", "scripted"), content, calls)


@pytest.fixture(scope="session")
def _server_thread() -> Iterator[tuple[ScriptedServer, str]]:
    pytest.importorskip("fastapi")
    uvicorn = pytest.importorskip("uvicorn")
    scripted = ScriptedServer()
    server = uvicorn.Server(uvicorn.Config(scripted.app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30  # a deadline: a loaded machine may take seconds
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the scripted OpenAI server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield scripted, f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(timeout=5)


@pytest.fixture
def scripted_server(_server_thread: tuple[ScriptedServer, str]) -> ScriptedServer:
    """The running server, with an empty request log; set `.script` before use."""
    scripted, _ = _server_thread
    scripted.requests.clear()
    return scripted


@pytest.fixture
async def openai_client(_server_thread: tuple[ScriptedServer, str]) -> AsyncIterator[Any]:
    """An `openai.AsyncOpenAI` pointed at the scripted server."""
    import openai

    client = openai.AsyncOpenAI(base_url=_server_thread[1], api_key="test-key", max_retries=0, timeout=10)
    yield client
    await client.close()
