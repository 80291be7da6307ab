"""The service's trainer ranks: N torch.distributed processes that train each RL step, started and supervised.

`RankGroup` is what the service calls instead of its own trainer's `train_step` when `train_ranks > 1`.
It sends every rank the step (groups, spec, and the served checkpoint to start from), waits for them, and
loads what rank 0 saved into the service's own `Trainer`, which then saves, serves and canaries the step as
it does any step (`ModelService.run_step`): the ranks change nothing the service has not checked.

Supervision: a rank that dies (killed, out of memory) or raises fails the step with `RankFailure`, naming
the rank, its pid and how it ended; every other rank is killed at once (they would otherwise wait in a
collective until its timeout), the service rolls the step back as it does any failed step, and the next
step starts N fresh ranks first. Nothing of a failed step reaches the service's trainer or the record.
The rank named is the cause, whichever peer noticed first: when a rank dies its peers' collectives fail at
once ("[gloo] Read error ... Connection reset by peer"), often before the supervisor sees the death, so a
rank's error waits up to `BLAME_GRACE_S` for another rank's exit and, if one ends, that rank is named.

Where the ranks run is a `RankBackend`: `LocalRanks` (processes of this machine) or `art.cluster.ray_ranks.RayRanks`
(Ray actors placed on a cluster). Local ranks are fresh interpreters (`python -m art.training.distributed.rank_main`) talking over a socket pair, not multiprocessing's spawn or forkserver:
those re-run the user's `__main__` in every child, and a training script without an `if __name__ ==
"__main__":` guard would start training again in each rank. `train_ranks=1` never gets here:
the service's own trainer trains, in its process, as before.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing.connection
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from art.training.distributed.rank_messages import RankInfo, RankStep, RankTemplate
from art.training.trainer import MicroBatchCallback, StepReport, Trainer
from art.trajectories import TrajectoryGroup
from art.types import TrainSpec

logger = logging.getLogger(__name__)

WORKER_MODULE = "art.training.distributed.rank_main"  # `python -m` it: one rank
BLAME_GRACE_S = 5.0
"""How long a rank's error waits for a peer's death before the rank that raised is named as the cause: a
peer's SIGKILL is seen within milliseconds on an idle machine; 5 s covers a loaded one."""


class RankFailure(RuntimeError):
    """A trainer rank died or failed: the step did not happen; every rank was stopped and restarts before
    the next step."""


class RankBackend(Protocol):
    """Where the ranks run (see the module docstring)."""

    world_size: int

    def start(self) -> list[RankInfo]:
        """Start every rank and wait until each has joined the group and loaded the model (RankFailure if not)."""
        ...

    def run_step(self, step: RankStep, on_micro_batch: MicroBatchCallback | None) -> StepReport:
        """Train `step` on every rank; rank 0's report (RankFailure, with every rank stopped, if any fails)."""
        ...

    def stop(self) -> None:
        """Stop every rank (politely, then by force)."""
        ...


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the rendezvous of a new process group)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def describe_exit(code: int | None) -> str:
    """How a process ended, in words: "exit code 3", "killed by SIGKILL (exit code -9)".

    Example:
        >>> describe_exit(-9)
        'killed by SIGKILL (exit code -9)'
    """
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name} (exit code {code})"
    return f"exit code {code}"


@dataclass
class _LocalRank:
    process: subprocess.Popen[bytes]
    conn: multiprocessing.connection.Connection  # the service's end of its socket pair


class LocalRanks:
    """Ranks as processes of this machine, one per device in `devices` (see the module docstring)."""

    def __init__(
        self, template: RankTemplate, devices: Sequence[str], *, module: str = WORKER_MODULE
    ) -> None:
        """`module`: what each process runs with `python -m` (a test may give a stand-in rank)."""
        self.template = template
        self.devices = list(devices)
        self.world_size = len(self.devices)
        self.module = module
        self._ranks: list[_LocalRank] = []

    def start(self) -> list[RankInfo]:
        port = free_port()
        for rank, device in enumerate(self.devices):
            parent, child = multiprocessing.connection.Pipe()  # a socket pair: the child gets its fd
            process = subprocess.Popen(
                [sys.executable, "-m", self.module, str(child.fileno())], pass_fds=[child.fileno()]
            )
            child.close()
            parent.send(self.template.setup(rank, self.world_size, "127.0.0.1", port, device))
            self._ranks.append(_LocalRank(process, parent))
        infos: list[RankInfo] = self._collect("starting", None)
        return infos

    def pids(self) -> list[int]:
        """The ranks' process ids, rank 0 first."""
        return [r.process.pid for r in self._ranks]

    def run_step(self, step: RankStep, on_micro_batch: MicroBatchCallback | None) -> StepReport:
        for rank in self._ranks:
            rank.conn.send(("step", step))
        reports = self._collect("training a step", on_micro_batch)
        report: StepReport = reports[0]
        return report

    def _collect(self, doing: str, on_micro_batch: MicroBatchCallback | None) -> list[Any]:
        """Each rank's next answer; on the first failure every rank is killed and RankFailure raised."""
        answers: list[Any] = [None] * self.world_size
        pending = set(range(self.world_size))
        while pending:
            multiprocessing.connection.wait([self._ranks[i].conn for i in pending], timeout=1.0)
            for i in sorted(pending):
                rank = self._ranks[i]
                while i in pending and rank.conn.poll():
                    try:
                        kind, payload = rank.conn.recv()
                    except (EOFError, OSError):
                        break  # it died: said below
                    except Exception as exc:  # e.g. an answer that does not unpickle
                        raise self._fail(
                            f"trainer rank {i} sent an unreadable answer while {doing}: {exc!r}"
                        ) from exc
                    if kind == "progress":
                        if on_micro_batch is not None:
                            on_micro_batch(*payload)
                    elif kind == "error":
                        raise self._fail(self._cause(i, doing, payload))
                    else:
                        answers[i] = payload
                        pending.discard(i)
                if i in pending and rank.process.poll() is not None:
                    raise self._fail(
                        f"trainer rank {i} (pid {rank.process.pid}) died while {doing}: "
                        f"{describe_exit(rank.process.returncode)}"
                    )
        return answers

    def _cause(self, noticed_by: int, doing: str, error: str) -> str:
        """What failed the step when rank `noticed_by` raised `error`: a peer that died within
        `BLAME_GRACE_S` (its peers' collectives fail the moment it dies), else that rank's own error."""
        deadline = time.monotonic() + BLAME_GRACE_S
        while True:
            dead = [
                (i, r) for i, r in enumerate(self._ranks) if i != noticed_by and r.process.poll() is not None
            ]
            if dead or time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        if dead:
            i, rank = dead[0]
            last_line = error.strip().splitlines()[-1] if error.strip() else "an error"
            return (
                f"trainer rank {i} (pid {rank.process.pid}) died while {doing}: "
                f"{describe_exit(rank.process.returncode)} (rank {noticed_by} then failed with: {last_line})"
            )
        pid = self._ranks[noticed_by].process.pid
        return f"trainer rank {noticed_by} (pid {pid}) failed while {doing}:\n{error}"

    def _fail(self, message: str) -> RankFailure:
        self.stop(timeout=0.0)
        return RankFailure(f"{message}. Every trainer rank was stopped; they restart before the next step.")

    def stop(self, timeout: float = 10.0) -> None:
        ranks, self._ranks = self._ranks, []
        for rank in ranks:
            if timeout > 0 and rank.process.poll() is None:
                with contextlib.suppress(OSError):
                    rank.conn.send(("stop", None))
        deadline = time.monotonic() + timeout
        for rank in ranks:
            try:
                rank.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                rank.process.kill()
                rank.process.wait(10)
            rank.conn.close()


class RankGroup:
    """The service's N trainer ranks (see the module docstring).

    `trainer`: the service's own trainer, which receives each trained step; `checkpoint_dir(step)`: the
    served checkpoint every rank starts a step from; `scratch_dir(step)`: a fresh folder rank 0 saves into
    (deleted once loaded), on storage every rank's machine reads."""

    def __init__(
        self,
        backend: RankBackend,
        *,
        trainer: Trainer,
        checkpoint_dir: Callable[[int], Path],
        scratch_dir: Callable[[int], Path],
    ) -> None:
        self.backend = backend
        self.trainer = trainer
        self.checkpoint_dir = checkpoint_dir
        self.scratch_dir = scratch_dir
        self.infos: list[RankInfo] = []
        self.starts = 0  # how many times the ranks were started (1 + restarts)
        self.running = False

    @property
    def world_size(self) -> int:
        """How many ranks train each step."""
        return self.backend.world_size

    def start(self) -> None:
        """Start every rank (blocking until all have loaded the model)."""
        t = time.perf_counter()
        self.infos = self.backend.start()
        self.starts += 1
        self.running = True
        where = ", ".join(f"rank {i.rank} pid {i.pid} on {i.host} {i.device}" for i in self.infos)
        logger.info("%d trainer ranks ready in %.1f s: %s", self.world_size, time.perf_counter() - t, where)

    def train_step(
        self,
        groups: Sequence[TrajectoryGroup],
        spec: TrainSpec,
        *,
        current_step: int,
        progress: bool = True,
        on_micro_batch: MicroBatchCallback | None = None,
    ) -> StepReport:
        """`Trainer.train_step` on every rank; the result is loaded into the service's trainer."""
        if not self.running:
            logger.warning("restarting %d trainer ranks (the last step's ranks failed)", self.world_size)
            self.start()
        out = self.scratch_dir(current_step + 1)
        try:
            step = RankStep(
                groups=list(groups),
                spec=spec,
                current_step=current_step,
                state_dir=str(self.checkpoint_dir(current_step)),
                out_dir=str(out),
            )
            try:
                report = self.backend.run_step(step, on_micro_batch)
            except RankFailure:
                self.running = False
                raise
            self.trainer.load(out)
        finally:
            shutil.rmtree(out, ignore_errors=True)
        return report

    def close(self) -> None:
        """Stop every rank."""
        self.running = False
        self.backend.stop()
