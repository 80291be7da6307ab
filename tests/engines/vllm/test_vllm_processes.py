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
    deadline = time.monotonic() + 30  # a deadline, not a margin: a loaded machine starts processes slowly
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


REAL_SCRIPT = """
import asyncio, sys, time
sys.path.insert(0, {tests!r})
from test_vllm_engine import _Model
from transformers import AutoTokenizer

from art.engines.factory import start_engine
from art.engines.vllm.process_group import members
from art.types import RuntimeOptions

async def main():
    options = RuntimeOptions(engine="vllm", vllm_python={python!r}, vllm_startup_timeout=600)
    engine = await start_engine(
        options, base_model={model!r}, served_name="base", model=_Model(),
        tokenizer=AutoTokenizer.from_pretrained({model!r}), device="cpu", cuda_devices=0,
    )
    pgid = engine.server.process.pid
    print(pgid, flush=True)
    print(" ".join(map(str, members(pgid))), flush=True)
    time.sleep(600)

asyncio.run(main())
"""


@pytest.mark.timeout(900)
def test_a_killed_script_leaves_no_real_vllm_process(tmp_path: Path) -> None:
    """The hardest way out, with the real vLLM (API server, engine core, workers): the user's script is
    SIGKILLed while vLLM serves; nothing of vLLM's process group is left."""
    from helpers_vllm import SKIP_REASON, find_vllm_python, make_vllm_tiny_model

    python = find_vllm_python()
    if python is None:
        pytest.skip(SKIP_REASON)
    model = make_vllm_tiny_model(tmp_path / "tiny")
    script = tmp_path / "script.py"
    tests = str(Path(__file__).parent)
    script.write_text(REAL_SCRIPT.format(tests=tests, python=python, model=str(model)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, str(Path(tests).parents[1])])}
    user = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    try:
        assert user.stdout is not None
        first = user.stdout.readline()
        assert first.strip().isdigit(), (
            f"vLLM did not start: {first!r} {user.stderr.read() if user.stderr else ''}"
        )
        pgid = int(first)
        running = user.stdout.readline().split()
        assert len(running) >= 2, f"vLLM's server and its engine core run in the group: {running}"
        user.send_signal(signal.SIGKILL)
        user.wait(60)
        assert wait_until_gone(pgid, seconds=60) == [], "vLLM left running after the script was killed"
    finally:
        if user.poll() is None:
            user.kill()
