"""`art serve` as a real subprocess on 127.0.0.1 (tests/hub/, benchmarks' tests)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

START_TIMEOUT = 600.0  # a cold machine builds the engine's C++ kernels at the first start


@dataclass
class ServeProcess:
    """A running `art serve`: its URL, key, folder and logs."""

    proc: subprocess.Popen[bytes]
    url: str
    path: Path
    port: int
    out: Path
    err: Path

    @property
    def key(self) -> str:
        return (self.path / ".serve" / "api_key").read_text().strip()

    def logs(self) -> str:
        return self.out.read_text(errors="replace") + self.err.read_text(errors="replace")

    def kill(self) -> None:
        """kill -9: no shutdown of any kind."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.kill()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_serve(path: Path, *args: str, port: int | None = None, log_name: str = "serve") -> ServeProcess:
    """Start `python -m art serve --path PATH --port PORT *args` and wait for its "ART serving at" line."""
    port = free_port() if port is None else port
    path.mkdir(parents=True, exist_ok=True)
    out, err = path.parent / f"{log_name}-{port}.out", path.parent / f"{log_name}-{port}.err"
    # The trainer's torch.compile costs minutes at the first step of every new process on this 2-core
    # host; these tests are about the remote plumbing (compiled training is tested with LocalBackend).
    # Tests load tiny models from their temporary folders: let the server load base models from there.
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "ART_TRAIN_COMPILE": "0",
        "ART_BASE_MODEL_ROOTS": tempfile.gettempdir(),
    }
    with open(out, "ab") as o, open(err, "ab") as e:
        proc = subprocess.Popen(
            [sys.executable, "-m", "art", "serve", "--path", str(path), "--port", str(port), *args],
            stdout=o,
            stderr=e,
            env=env,
        )
    deadline = time.monotonic() + START_TIMEOUT
    pattern = re.compile(rf"ART serving at http://\S+:{port} ")
    while True:
        if pattern.search(out.read_text(errors="replace")):
            return ServeProcess(proc, f"http://127.0.0.1:{port}", path, port, out, err)
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(
                f"art serve did not start (exit {proc.poll()}):\n{out.read_text()}\n{err.read_text()[-5000:]}"
            )
        time.sleep(0.2)
