"""`python -m art.training.distributed.rank_main FD`: one local trainer rank (`ranks.LocalRanks` starts it).

FD is the process's end of a socket pair; the first message on it is the rank's `RankSetup`, then
`distributed_worker.rank_process_main` runs. A module of its own so that what crosses the pipe pickles as
`art.training.distributed.worker.*`, not `__main__.*`."""

from __future__ import annotations

import multiprocessing.connection
import sys

from art.training.distributed.worker import rank_process_main


def main(argv: list[str]) -> None:
    """Run the rank whose socket is file descriptor `argv[1]`."""
    connection = multiprocessing.connection.Connection(int(argv[1]))
    rank_process_main(connection, connection.recv())


if __name__ == "__main__":
    main(sys.argv)
