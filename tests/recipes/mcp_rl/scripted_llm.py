"""A scripted OpenAI-compatible server (FastAPI + uvicorn in a thread, 127.0.0.1) for the MCP-RL and
AutoRL tests: it plays the agent, the generator and the judge, each by the model name it is asked for.

`server.on(model, handler)` sets what a model answers: the handler gets the request body and returns
the reply's text, or a dict `{"content": ..., "tool_calls": [(name, arguments_dict_or_raw_json)]}`.
Agent replies carry logprobs and token ids, as our engine's do, so trajectories made from them are
trainable as far as the client side can tell. Every request body is kept in `server.requests`.
A model with no handler gets a 404 naming the models that exist.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from helpers_servers import UvicornThread, completion_body

Handler = Callable[[dict[str, Any]], str | dict[str, Any]]
BLOCK = re.compile(r'<trajectory id="([^"]+)">\n(.*?)\n</trajectory>', re.DOTALL)


def ruler_answer(body: dict[str, Any], score: Callable[[str], float]) -> str:
    """A valid RULER answer for the request: `score(block_text)` for every trajectory block shown."""
    text = "\n".join(str(m.get("content") or "") for m in body["messages"] if m.get("role") == "user")
    scores = [
        {"trajectory_id": tid, "explanation": "scripted", "score": round(min(max(score(block), 0.0), 1.0), 6)}
        for tid, block in BLOCK.findall(text)
    ]
    return json.dumps({"scores": scores})


def user_text(body: dict[str, Any]) -> str:
    """Every user message of a request, joined."""
    return "\n".join(str(m.get("content") or "") for m in body["messages"] if m.get("role") == "user")


class ScriptedLLM:
    """Start with `.start()` (returns `http://127.0.0.1:PORT/v1`), stop with `.stop()`."""

    def __init__(self) -> None:
        self.handlers: dict[str, Handler] = {}
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.base_url = ""
        self.server: UvicornThread | None = None

    def on(self, model: str, handler: Handler) -> None:
        self.handlers[model] = handler

    def reset(self) -> None:
        with self.lock:
            self.handlers.clear()
            self.requests.clear()

    def requests_for(self, model: str) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r.get("model") == model]

    def _reply(self, body: dict[str, Any], reply: str | dict[str, Any]) -> dict[str, Any]:
        if isinstance(reply, str):
            reply = {"content": reply}
        calls = [
            {
                "id": f"call_{uuid.uuid4().hex[:8]}",
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
            for name, args in reply.get("tool_calls", [])
        ]
        return completion_body(str(body.get("model", "scripted")), reply.get("content"), calls)

    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Any:
            body = await request.json()
            with self.lock:
                self.requests.append(body)
                handler = self.handlers.get(str(body.get("model")))
            if handler is None:
                message = f"The model {body.get('model')!r} does not exist; served: {sorted(self.handlers)}"
                return JSONResponse({"error": {"message": message, "type": "NotFoundError"}}, status_code=404)
            return self._reply(body, handler(body))

        @app.get("/v1/models")
        async def models() -> Any:
            return {"object": "list", "data": [{"id": m, "object": "model"} for m in sorted(self.handlers)]}

        return app

    def start(self) -> str:
        self.server = UvicornThread(self._app(), name="scripted LLM server")
        self.base_url = self.server.start()
        return self.base_url

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


@pytest.fixture(scope="session")
def llm_server() -> Iterator[ScriptedLLM]:
    """One scripted LLM server for the session (import this fixture into a conftest to use it)."""
    server = ScriptedLLM()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def llm(llm_server: ScriptedLLM) -> ScriptedLLM:
    """The scripted LLM server with no handlers and no recorded requests."""
    llm_server.reset()
    return llm_server


@pytest.fixture(autouse=True)
def _judge_cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge cache of every test lives in its own temp folder (never ~/.cache)."""
    monkeypatch.setenv("ART_JUDGE_CACHE_DIR", str(tmp_path / "judge-cache"))
