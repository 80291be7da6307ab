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
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

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
        self.server: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None

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
        content = reply.get("content")
        calls = [
            {
                "id": f"call_{uuid.uuid4().hex[:8]}",
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
            for name, args in reply.get("tool_calls", [])
        ]
        text = (content or "") + "".join(f"<tool_call>{json.dumps(c['function'])}</tool_call>" for c in calls)
        pieces = [text[i : i + 4] for i in range(0, len(text), 4)] or [""]
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:8]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls" if calls else "stop",
                    "message": message,
                    "logprobs": {
                        "content": [
                            {"token": p, "logprob": -0.5, "bytes": list(p.encode()), "top_logprobs": []}
                            for p in pieces
                        ]
                    },
                    "token_ids": list(range(len(pieces))),
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": len(pieces), "total_tokens": 1 + len(pieces)},
        }

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
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(self._app(), log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the scripted LLM server did not start")
            time.sleep(0.01)
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self.base_url

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=5)
