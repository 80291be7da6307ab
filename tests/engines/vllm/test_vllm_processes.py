"""No vLLM process is left behind: `close()` ends the server's whole process group even after the server itself
died, and a script that never calls `close()` leaves nothing running however it ends (a normal exit, an
exception, SIGTERM, SIGKILL). Run against the fake vLLM server, which like vLLM starts an "engine core"
process in its group that outlives it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_vllm_engine import _start, fake_python  # noqa: F401 (a fixture)

from art.engines.vllm.process_group import members


def wait_until_gone(pgid: int, seconds: float = 20.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while members(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return members(pgid)


def engine_core_of(pgid: int) -> list[int]:
    return [p for p in members(pgid) if b"fake-engine-core" in Path(f"/proc/{p}/cmdline").read_bytes()]


pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process groups from /proc (Linux)")


async def test_close_stops_the_engine_core_after_the_server_was_killed(
    fake_python: str,  # noqa: F811
    tiny_model_path: Path,
) -> None:
    engine = await _start(fake_python, tiny_model_path)
    assert engine.server.process is not None
    pgid = engine.server.process.pid
    deadline = time.monotonic() + 10
    while not engine_core_of(pgid) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert engine_core_of(pgid), "the fake server starts an engine core"
    os.kill(pgid, signal.SIGKILL)  # the API server only, as a crash or the OOM killer would
    await asyncio.to_thread(engine.server.process.wait, 10)
    assert engine_core_of(pgid), "its engine core runs on"
    await engine.close()
    assert members(pgid) == []


SCRIPT = """
import asyncio, os, signal, sys, time
sys.path.insert(0, {tests!r})
from test_vllm_engine import _start

from test_vllm_processes import engine_core_of

async def main():
    engine = await _start({python!r}, {model!r})
    pgid = engine.server.process.pid
    print(pgid, flush=True)
    deadline = time.monotonic() + 30  # the script ends only once its engine core runs (else nothing to leave)
    while not engine_core_of(pgid) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    print(" ".join(map(str, engine_core_of(pgid))) or "none", flush=True)
    if {how!r} == "exception":
        raise RuntimeError("the user's script failed")
    if {how!r} in ("sigterm", "sigkill"):
        time.sleep(600)

asyncio.run(main())
"""


@pytest.mark.parametrize("how", ["exit", "exception", "sigterm", "sigkill"])
def test_a_script_that_never_closes_leaves_no_process(
    how: str,
    fake_python: str,  # noqa: F811
    tiny_model_path: Path,
    tmp_path: Path,
) -> None:
    script = tmp_path / "script.py"
    tests = str(Path(__file__).parent)
    script.write_text(SCRIPT.format(tests=tests, python=fake_python, model=str(tiny_model_path), how=how))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, str(Path(tests).parents[1])])}
    user = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    assert user.stdout is not None
    pgid = int(user.stdout.readline())
    # the script saw its engine core running before it went on to end (a normal exit or an exception ends it
    # at once: the test's own look could come after the clean-up it checks)
    cores = user.stdout.readline().split()
    assert cores and all(c.isdigit() for c in cores), f"the fake vLLM's engine core is running: {cores}"
    if how in ("sigterm", "sigkill"):
        user.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
    user.wait(60)
    assert wait_until_gone(pgid) == [], f"left running after the script ended ({how})"
