"""A scripted OpenAI-compatible judge: a real HTTP server (FastAPI + uvicorn in a thread, 127.0.0.1).

It reads RULER's prompt and answers deterministically, so tests can check what the judge saw and what the
client made of the answer. The served model name picks the judge's mind:
- "marker":   each trajectory scores the number after `MARK:` in its text (0.5 when there is none);
- "reverse":  1 - marker (a judge that disagrees);
- "position": by shown position, first 1.0 down to last 0.0 (a maximally position-biased judge);
- "half":     0.5 for everyone;
- "garbage":  never answers JSON (a weak judge).
A trajectory containing ALWAYS_GARBAGE makes any judge answer non-JSON for that prompt.

Faults queued in `script.faults` apply to the next requests, one per request: "non_json", "fenced" (valid
JSON inside a ```json fence), "wrong_ids", "missing_id", "out_of_range", "empty", "429", "500", "slow"
(answers after `script.slow_seconds`), "401"; `script.model_faults[model]` applies a fault to every request
for that model. Every request body and its Authorization header are recorded. A "slow" answer comes after
`slow_seconds` (counted in `slow_answered`), or never if the script is reset first (the next test's
`reset` releases it uncounted): a test that must not wait for it sets `slow_seconds` past its own length.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from helpers_servers import UvicornThread

BLOCK = re.compile(r'<trajectory id="([^"]+)">\n(.*?)\n</trajectory>', re.DOTALL)
MARK = re.compile(r"MARK:([0-9.]+)")


@dataclass
class Script:
    faults: deque[str] = field(default_factory=deque)
    slow_seconds: float = 2.0
    reject_response_format: bool = False
    model_faults: dict[str, str] = field(default_factory=dict)  # model -> a fault for its every request
    requests: list[dict[str, Any]] = field(default_factory=list)
    authorization: list[str | None] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    release: threading.Event = field(default_factory=threading.Event)  # set by `reset`: slow answers give up
    slow_answered: int = 0  # "slow" answers that waited their slow_seconds and were sent

    def reset(self) -> None:
        with self.lock:
            self.release.set()
            self.release = threading.Event()
            self.slow_answered = 0
            self.faults.clear()
            self.requests.clear()
            self.authorization.clear()
            self.slow_seconds = 2.0
            self.reject_response_format = False
            self.model_faults.clear()

    def queue(self, *faults: str) -> None:
        with self.lock:
            self.faults.extend(faults)

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.requests)


def first_user_text(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        if message.get("role") == "user":
            return str(message.get("content", ""))
    return ""


def judge_scores(model: str, text: str) -> list[dict[str, Any]]:
    """What the scripted judge thinks of each trajectory block in `text`, in shown order."""
    blocks = BLOCK.findall(text)
    out = []
    for position, (tid, body) in enumerate(blocks):
        found = MARK.search(body)
        marker = float(found.group(1)) if found else 0.5
        if model == "reverse":
            score = 1.0 - marker
        elif model == "position":
            score = 1.0 - position / max(len(blocks) - 1, 1)
        elif model == "half":
            score = 0.5
        else:
            score = marker
        out.append(
            {"trajectory_id": tid, "explanation": f"{model} judge: marker {marker}", "score": round(score, 6)}
        )
    return out


def completion(model: str, content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    body = {"error": {"message": message, "type": "scripted", "code": status}}
    return JSONResponse(body, status_code=status, headers=headers)


def build_app(script: Script) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        body = await request.json()
        with script.lock:
            script.requests.append(body)
            script.authorization.append(request.headers.get("authorization"))
            model = str(body.get("model", "marker"))
            fault = script.faults.popleft() if script.faults else script.model_faults.get(model)
        if fault == "slow":
            release, deadline = script.release, time.monotonic() + script.slow_seconds
            while not release.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            with script.lock:
                if release.is_set():  # the test that asked for it is over: nobody counts this answer
                    return error(500, "released")
                script.slow_answered += 1
        if fault == "429":
            return error(429, "rate limited, slow down", {"retry-after": "0"})
        if fault == "500":
            return error(500, "scripted server error")
        if fault == "401":
            return error(401, "invalid api key")
        if fault == "too_long":  # what our server and vLLM answer
            message = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."
            return JSONResponse(
                {"error": {"message": message, "code": "context_length_exceeded"}}, status_code=400
            )
        if script.reject_response_format and "response_format" in body:
            return error(400, "response_format is not supported by this server")
        text = first_user_text(body)
        if model == "garbage" or "ALWAYS_GARBAGE" in text or fault == "non_json":
            return completion(model, "Trajectory 1 looks best to me, the others less so.")
        if fault == "empty":
            return completion(model, "")
        scores = judge_scores(model, text)
        if fault == "wrong_ids":
            for k, entry in enumerate(scores):
                entry["trajectory_id"] = f"t{k}"
        elif fault == "missing_id":
            scores = scores[:-1]
        elif fault == "out_of_range":
            scores[0]["score"] = 1.7
        content = json.dumps({"scores": scores})
        if fault == "fenced":
            content = f"Here are my scores:\n```json\n{content}\n```"
        return completion(model, content)

    return app


class ScriptedJudgeServer(UvicornThread):
    """Start with `.start()` (returns the base URL, `http://127.0.0.1:PORT/v1`), stop with `.stop()`."""

    def __init__(self) -> None:
        self.script = Script()
        super().__init__(build_app(self.script), name="scripted judge server")
