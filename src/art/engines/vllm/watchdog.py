"""Stops a vLLM server's process group when the Python process that started it is gone.

    python -I -S watchdog.py PARENT_PID PGID

Run by `process_group.watch` as a child of that process: when it dies however it dies (SIGKILL included),
this process is re-parented and `os.getppid()` changes; then it SIGTERMs the group, waits up to 10 s and
SIGKILLs what is left. It also ends, doing nothing, once the group is gone (the server was stopped). It
imports nothing of ours, so that it starts in milliseconds and survives whatever broke the parent.
"""

from __future__ import annotations

import os
import signal
import sys
import time

TYPE_CHECKING = False  # typing itself is not imported: this starts in milliseconds
if TYPE_CHECKING:
    from collections.abc import Callable


def alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop(
    pgid: int, grace: float, kill_grace: float, left: Callable[[int], bool] = alive, poll: float = 0.2
) -> None:
    """SIGTERM group `pgid`, SIGKILL what is `left` after `grace` seconds, and wait up to `kill_grace`
    seconds for that to go; returns as soon as nothing is left."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, kill_grace)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while left(pgid) and time.monotonic() < deadline:
            time.sleep(poll)
        if not left(pgid):
            return


def main() -> None:
    parent, pgid = int(sys.argv[1]), int(sys.argv[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while os.getppid() == parent:
        if not alive(pgid):
            return
        time.sleep(0.5)
    stop(pgid, grace=10.0, kill_grace=0.0)


if __name__ == "__main__":
    main()
