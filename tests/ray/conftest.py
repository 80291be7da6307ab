"""A Ray cluster of two nodes on 127.0.0.1 (`ray start --head` + `ray start --address`, separate resources),
started for the module that asks for it and stopped after: only the processes it started (their process
groups), never `ray stop` (which would stop every Ray on the machine)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

RAY = str(Path(sys.executable).with_name("ray"))
NODE = ["--node-ip-address", "127.0.0.1", "--num-cpus", "2", "--object-store-memory", str(100 * 2**20)]
NODE += ["--disable-usage-stats", "--block"]


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


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """The head node's address ("127.0.0.1:PORT") of a running two-node cluster."""
    pytest.importorskip("ray", reason="needs the `ray` extra: pip install -e '.[ray]'")
    import ray

    port = _free_port()
    address = f"127.0.0.1:{port}"
    temp = tempfile.mkdtemp(prefix="artray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    log = open(Path(temp) / "nodes.log", "wb")  # noqa: SIM115 (closed below)
    head = subprocess.Popen(
        [RAY, "start", "--head", "--port", str(port), "--include-dashboard=false", "--temp-dir", temp, *NODE,
         "--resources", '{"node_a": 1}'],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    nodes = [head]
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert head.poll() is None and time.monotonic() < deadline, (
                    Path(temp) / "nodes.log"
                ).read_text()
                time.sleep(0.5)
        nodes.append(
            subprocess.Popen(
                [RAY, "start", "--address", address, *NODE, "--resources", '{"node_b": 1}'],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        ray.init(address=address, namespace="art", log_to_driver=False)
        while len([n for n in ray.nodes() if n["Alive"]]) < 2:
            assert time.monotonic() < deadline, (Path(temp) / "nodes.log").read_text()
            time.sleep(0.5)
        yield address
    finally:
        ray.shutdown()
        for node in reversed(nodes):
            _stop(node)
        log.close()
