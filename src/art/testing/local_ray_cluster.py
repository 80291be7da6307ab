"""A Ray cluster of several nodes on this machine (127.0.0.1): for tests, benchmarks and trying RayBackend out.

`LocalCluster(nodes=2, cpus_per_node=2).start()` runs `ray start --head` and `nodes - 1` more
`ray start --address` (each `--block`, in its own process group, with its own CPUs and a custom resource
`node_0`, `node_1`, ...), under a fresh short temp dir and a free port, so it clashes with no other Ray on
the machine; `stop()` ends only those processes (their process groups) and removes the temp dir, never `ray stop` (which would stop
every Ray here). The same commands start a real cluster by hand (docs/scale.md).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

START_TIMEOUT_S = 120.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the node's process group (`ray start --block` takes its raylet and workers down), then
    SIGKILL what is left."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM:
            time.sleep(1.0)  # let the group's other processes go; then kill any that stayed


class LocalCluster:
    """`nodes` Ray nodes on 127.0.0.1 (see the module docstring); `address` is the head's "127.0.0.1:PORT"."""

    def __init__(self, nodes: int = 2, cpus_per_node: int = 2, object_store_mib: int = 100) -> None:
        self.nodes = nodes
        self.cpus_per_node = cpus_per_node
        self.object_store_mib = object_store_mib
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.temp_dir = ""
        self._processes: list[subprocess.Popen[bytes]] = []
        self._log: IO[bytes] | None = None

    def _node_args(self, index: int) -> list[str]:
        return [
            "--node-ip-address",
            "127.0.0.1",
            "--num-cpus",
            str(self.cpus_per_node),
            "--object-store-memory",
            str(self.object_store_mib * 2**20),
            "--disable-usage-stats",
            "--block",
            "--resources",
            json.dumps({f"node_{index}": 1}),
        ]

    def log_text(self) -> str:
        """What the nodes printed so far."""
        path = Path(self.temp_dir) / "nodes.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self) -> LocalCluster:
        """Start every node and wait until all have joined (RuntimeError with their log if not)."""
        ray = str(Path(sys.executable).with_name("ray"))
        self.temp_dir = tempfile.mkdtemp(
            prefix="artray-", dir="/tmp"
        )  # Ray's socket paths must fit 107 bytes
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        self._log = open(Path(self.temp_dir) / "nodes.log", "wb")  # noqa: SIM115 (closed by stop)

        def launch(argv: list[str]) -> None:
            self._processes.append(
                subprocess.Popen(
                    argv, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
                )
            )

        try:
            head = [ray, "start", "--head", "--port", str(self.port), "--include-dashboard=false"]
            launch([*head, "--temp-dir", self.temp_dir, *self._node_args(0)])
            deadline = time.monotonic() + START_TIMEOUT_S
            while not self._answers():
                if self._processes[0].poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the Ray head node did not start:\n{self.log_text()[-3000:]}")
                time.sleep(0.5)
            for index in range(1, self.nodes):
                launch([ray, "start", "--address", self.address, *self._node_args(index)])
            while self._alive_nodes() < self.nodes:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Ray nodes did not all join:\n{self.log_text()[-3000:]}")
                time.sleep(0.5)
        except BaseException:
            self.stop()
            raise
        return self

    def _answers(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def _alive_nodes(self) -> int:
        """How many nodes have said they started (each `ray start` prints it once it has joined)."""
        return self.log_text().count("Ray runtime started")

    def stop(self) -> None:
        """End every node this cluster started (their process groups) and remove its temp dir."""
        processes, self._processes = self._processes, []
        for process in reversed(processes):
            _stop(process)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
