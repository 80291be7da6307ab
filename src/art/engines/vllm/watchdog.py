"""Stops a vLLM server's process group when the Python process that started it is gone.

    python -I -S watchdog.py PARENT_PID PGID

Run by `process_group.watch` as a child of that process: when it dies however it dies (SIGKILL included),
this process is re-parented and `os.getppid()` changes; then it SIGTERMs the group, waits up to 10 s and
SIGKILLs what is left. It also ends, doing nothing, once the group is gone (the server was stopped). It
imports nothing of ours, so that it starts in milliseconds and survives whatever broke the parent.
"""

import os
import signal
import sys
import time


def alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main() -> None:
    parent, pgid = int(sys.argv[1]), int(sys.argv[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while os.getppid() == parent:
        if not alive(pgid):
            return
        time.sleep(0.5)
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)


if __name__ == "__main__":
    main()
