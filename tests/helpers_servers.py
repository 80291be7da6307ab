"""Test doubles of OpenAI-compatible servers share these: a uvicorn server on a thread (127.0.0.1, a free
port) and the body of a chat.completion whose choice carries logprobs and token ids, as ART's server's do."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from typing import Any


class UvicornThread:
    """Serves an ASGI app on 127.0.0.1 from a daemon thread; `start()` returns `http://127.0.0.1:PORT/v1`."""

    def __init__(self, app: Any, name: str = "test server") -> None:
        self.app = app
        self.name = name
        self.server: Any = None
        self.thread: threading.Thread | None = None
        self.base_url = ""

    def start(self) -> str:
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30  # a deadline: a loaded machine may take seconds
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"the {self.name} did not start")
            time.sleep(0.01)
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self.base_url

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=5)


def completion_body(
    model: str,
    content: str | None,
    calls: list[dict[str, Any]],
    *,
    piece_chars: int = 3,
    logprob: float = -0.25,
) -> dict[str, Any]:
    """A chat.completion with one choice: `content`, tool `calls` (OpenAI shape), and one logprob entry and
    token id per `piece_chars` characters of the text (tool calls rendered Hermes-style)."""
    text = (content or "") + "".join(f"<tool_call>{c['function']}</tool_call>" for c in calls)
    pieces = [text[i : i + piece_chars] for i in range(0, len(text), piece_chars)] or [""]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:8]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls" if calls else "stop",
                "message": message,
                "logprobs": {
                    "content": [
                        {"token": p, "logprob": logprob, "bytes": list(p.encode()), "top_logprobs": []}
                        for p in pieces
                    ]
                },
                "token_ids": list(range(len(pieces))),
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": len(pieces), "total_tokens": 1 + len(pieces)},
    }
