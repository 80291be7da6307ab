"""One writer per model record: an OS file lock on `{model folder}/.writer.lock`.

A service (`LocalBackend`'s or `art serve`'s) takes its model's lock before it touches the record and keeps
it while it serves; a second one on the same record is refused at once, by `RecordInUseError`, whose
message names the holder (pid, host, since when, who). Two writers would otherwise both take "the next
step": the loser's rollback would set the winner's committed checkpoint aside, and both would append to
one history.

The lock is `fcntl.flock` on an open file, so the operating system drops it when the holder's process
dies, however it dies (`kill -9` included): a stale lock file left by a dead process holds no lock, and
the next writer takes it over (and rewrites the holder's details). The file itself is never deleted (so
two processes never lock two different files of the same name). Holder details are informative only;
the lock is what counts. On a system without `fcntl` (Windows) no lock is taken.

Example:
    lock = RecordLock(Path(".art/demo/models/agent"), owner="LocalBackend")
    lock.acquire()   # RecordInUseError if another process (or service) writes this record
    ...
    lock.release()
"""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = ".writer.lock"


class RecordInUseError(RuntimeError):
    """Another writer holds the record's lock; `holder` is what it wrote about itself (may be empty)."""

    def __init__(self, message: str, holder: dict[str, Any]) -> None:
        super().__init__(message)
        self.holder = holder


def describe_holder(holder: dict[str, Any]) -> str:
    """ "pid 123 on host box since 2026-01-01T00:00:00+00:00 (art serve)", from what the holder wrote."""
    if not holder:
        return "another process (it has not written its details yet)"
    parts = [f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}"]
    if holder.get("since"):
        parts.append(f"since {holder['since']}")
    text = " ".join(parts)
    return f"{text} ({holder['owner']})" if holder.get("owner") else text


class RecordLock:
    """The writer's lock of the record in `folder` (see the module docstring)."""

    def __init__(self, folder: str | os.PathLike[str], *, owner: str) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self.owner = owner
        self._file: TextIO | None = None

    @property
    def held(self) -> bool:
        return self._file is not None

    def read_holder(self) -> dict[str, Any]:
        """What the current (or last) holder wrote in the lock file ({} when nothing readable)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def acquire(self) -> None:
        """Take the lock or raise `RecordInUseError` at once, naming the holder. Idempotent."""
        if self._file is not None or fcntl is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held open while the lock is held
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            holder = self.read_holder()
            raise RecordInUseError(
                f"the record {self.folder} is in use by another writer: {describe_holder(holder)}. "
                "One service at a time may train and write a model's record; stop that one first, or use "
                "another path or model name. (A writer that died holds no lock: this one is alive.)",
                holder,
            ) from None
        except BaseException:
            f.close()
            raise
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
            "owner": self.owner,
        }
        try:  # informative only: a full disk must not keep a writer from its record
            f.seek(0)
            f.truncate()
            f.write(json.dumps(holder) + "\n")
            f.flush()
        except OSError:
            pass
        self._file = f

    def release(self) -> None:
        """Let go of the lock (closing the file releases it). Idempotent."""
        f, self._file = self._file, None
        if f is not None:
            f.close()
