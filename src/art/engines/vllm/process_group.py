"""The vLLM server's whole process group: who is in it, stopping all of it, and never leaving it behind.

vLLM's API server starts an `EngineCore` process, which starts its workers: gigabytes of memory in processes
that are not ours. The server starts in a session of its own (`start_new_session=True`), so the group id is
its pid and every process vLLM starts inherits it. Three rules follow:

- `stop_group` signals the *group*, not the server: the server may be dead already (killed, crashed) while
  its engine core runs on; SIGTERM, then SIGKILL for what is left after a grace period.
- `atexit` stops every group still running when the interpreter exits normally or on an exception.
- a watchdog (`watchdog.py`, a few lines of Python with no imports of ours, one per server) stops the group
  when this process is gone however it ended: SIGTERM, SIGKILL, `os._exit`, a crash.

Linux reads the group's members from /proc (a dead member the system has not reaped yet is not counted);
elsewhere `killpg(pgid, 0)` answers whether anything is left.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading
from pathlib import Path

from art.engines.vllm import watchdog

WATCHDOG = Path(__file__).with_name("watchdog.py")

_live: set[int] = set()  # process groups started here and not stopped yet
_lock = threading.Lock()


def members(pgid: int) -> list[int]:
    """The living processes of group `pgid` (zombies left out)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


def stop_group(pgid: int, timeout: float = 30.0) -> None:
    """SIGTERM every process of group `pgid`, SIGKILL what is left after `timeout` seconds; returns when
    none is left (or after a further 10 s of SIGKILL)."""
    watchdog.stop(pgid, grace=timeout, kill_grace=10.0, left=lambda group: bool(members(group)), poll=0.1)
    forget(pgid)


def watch(pgid: int) -> subprocess.Popen[bytes]:
    """Track group `pgid` for `atexit`, and start its watchdog (which ends when the group does)."""
    with _lock:
        _live.add(pgid)
    return subprocess.Popen(
        [sys.executable, "-I", "-S", str(WATCHDOG), str(os.getpid()), str(pgid)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C to our terminal must not kill it before it did its job
    )


def forget(pgid: int) -> None:
    """Group `pgid` is stopped: nothing to do for it at exit."""
    with _lock:
        _live.discard(pgid)


@atexit.register
def _stop_all_at_exit() -> None:
    with _lock:
        groups = list(_live)
    for pgid in groups:
        stop_group(pgid, timeout=10.0)
