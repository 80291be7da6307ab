"""`python -m stand_in_rank FD`: a trainer rank that plays a scripted part, so the supervisor's choice of whom to
blame is tested without torch.distributed's timing (tests/training/test_rank_blame.py).

The script is the environment's `STAND_IN_RANK_SCRIPT`: comma-separated `rank=part`, parts:
- `ok`: answers every step with a report;
- `noticer`: answers a step at once with a gloo-style error, as a survivor whose peer died does;
- `raise`: answers a step with its own error (a real bug in this rank);
- `die:SECONDS`: is killed by SIGKILL that long after the step arrives (without answering);
- `hang`: never answers (blocked in a collective, as a healthy peer of a failing rank is).
"""

from __future__ import annotations

import multiprocessing.connection
import os
import signal
import sys
import time

from art.training.distributed.rank_messages import RankInfo


def main(argv: list[str]) -> None:
    """Play this rank's part (see the module docstring) on the socket at file descriptor `argv[1]`."""
    conn = multiprocessing.connection.Connection(int(argv[1]))
    setup = conn.recv()
    parts = dict(item.split("=", 1) for item in os.environ["STAND_IN_RANK_SCRIPT"].split(","))
    part = parts.get(str(setup.rank), "ok")
    conn.send(("ready", RankInfo(rank=setup.rank, pid=os.getpid(), host="localhost", device="cpu")))
    while True:
        kind, _payload = conn.recv()
        if kind == "stop":
            return
        if part == "noticer":
            conn.send(
                (
                    "error",
                    "Traceback ...\nRuntimeError: [gloo] Read error [127.0.0.1]: Connection reset by peer",
                )
            )
        elif part == "raise":
            conn.send(("error", "Traceback ...\nValueError: a bug in this rank"))
        elif part.startswith("die:"):
            time.sleep(float(part.split(":", 1)[1]))
            os.kill(os.getpid(), signal.SIGKILL)
        elif part == "hang":
            time.sleep(3600)
        else:
            conn.send(("done", None))


if __name__ == "__main__":
    main(sys.argv)
