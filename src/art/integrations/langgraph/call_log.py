"""The call log of a wrapped LangGraph rollout: one JSON line per LLM call, written as it happens.

Each line is a `LoggedCall`: the exact request body the chat model sent (messages, tools, sampling
options) and the exact response body the server returned (its Choices carry logprobs and token ids), or the
error status and text when the call failed. The log is plain JSON (never pickles), so it can be read by
anyone, and it is appended and flushed after every call: when a rollout raises, the calls it made up to
that point are already on disk for debugging (`load_trajectory(path)` rebuilds the partial trajectory).

This module imports nothing of LangChain; it only knows the OpenAI wire format.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, PrivateAttr

from art.record.storage import ModelStorage, validate_name

CALL_LOGS_FOLDER = "langgraph"
"""The folder of a model's record that holds wrapped rollouts' call logs (`ModelStorage.owned_folder`)."""


def call_log_path(storage: ModelStorage, rollout_id: str) -> Path:
    """Where `art.langgraph.wrap_rollout` writes the JSON call log of one rollout: `{record}/langgraph/{id}.jsonl`."""
    return storage.owned_folder(CALL_LOGS_FOLDER) / f"{validate_name(rollout_id, 'rollout id')}.jsonl"


class LoggedCall(BaseModel):
    """One chat-completions call: what was sent, what came back (or why it failed).

    Example:
        call = read_call_log(path)[-1]
        print(call.ok, call.status_code, call.error)
    """

    request: dict[str, Any]
    response: dict[str, Any] | None = None
    status_code: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the call returned a completion (a 2xx response with at least one choice)."""
        return self.error is None and self.response is not None and bool(self.response.get("choices"))


class CallLog(BaseModel):
    """The calls of one rollout, in the order they finished; mirrored line by line to `path`.

    Safe to append from several threads (a sync `invoke` inside an async graph runs in a worker thread).

    Example:
        log = CallLog(path=call_log_path(model.storage, "rollout-1"))
        log.append(LoggedCall(request={"messages": messages}, response=completion, status_code=200))
    """

    path: Path
    calls: list[LoggedCall] = Field(default_factory=list)

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def append(self, call: LoggedCall) -> None:
        """Record a call in memory and append it to the file (flushed and fsynced)."""
        line = json.dumps(call.model_dump(mode="json")) + "\n"
        with self._lock:
            self.calls.append(call)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())

    def discard(self) -> None:
        """Delete the file (the calls stay in memory)."""
        self.path.unlink(missing_ok=True)


def read_call_log(path: str | os.PathLike[str]) -> list[LoggedCall]:
    """The calls recorded in a log file, oldest first. A torn last line (crash mid-write) is skipped.

    Example:
        calls = read_call_log(".art/demo/models/agent-001/langgraph/rollout-1.jsonl")
    """
    calls: list[LoggedCall] = []
    for i, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        try:
            calls.append(LoggedCall.model_validate(json.loads(line)))
        except ValueError:  # json.JSONDecodeError and pydantic's ValidationError are ValueErrors
            warnings.warn(
                f"{path}: line {i + 1} is not a logged call (interrupted write?); skipped", stacklevel=2
            )
    return calls
