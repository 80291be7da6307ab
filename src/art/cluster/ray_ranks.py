"""N trainer ranks as Ray actors: `art.training.distributed.ranks.RankBackend` on a cluster.

A placement group (strategy PACK: as few nodes as hold them, so collectives stay local where they can)
reserves one bundle per rank; each `RankActor` runs `art.training.distributed.worker.RankWorker`, the same
code a local rank process runs. Rank 0's actor names its node's address and a free port, every rank joins
the process group there (gloo on CPUs, NCCL on GPUs). A rank actor that dies mid-step (`ActorDiedError`) or
fails fails the step: every rank actor is killed (the others wait in a collective) and the group is freed;
`RankGroup` starts a fresh set before the next step. Ray does not restart rank actors itself
(`max_restarts=0`): a process group must be rebuilt whole.
"""

from __future__ import annotations

import contextlib
import socket
import time
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from art.training.distributed.rank_messages import RankInfo, RankSetup, RankStep, RankTemplate
from art.training.distributed.ranks import BLAME_GRACE_S, RankFailure, free_port
from art.training.distributed.worker import RankWorker
from art.training.trainer import MicroBatchCallback, StepReport

PLACEMENT_TIMEOUT_S = 300.0


class RankActor:
    """One trainer rank on a Ray worker."""

    def __init__(self) -> None:
        self.worker: RankWorker | None = None

    def address(self) -> tuple[str, int]:
        """This node's address and a free port on it: the process group's rendezvous (rank 0's)."""
        address: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        return address, free_port(host="0.0.0.0")

    def start(self, setup: RankSetup) -> RankInfo:
        self.worker = RankWorker(setup)
        info = self.worker.start()
        info.extra["node_id"] = ray.get_runtime_context().get_node_id()
        info.host = socket.gethostname()
        return info

    def train_step(self, step: RankStep) -> StepReport | None:
        assert self.worker is not None
        return self.worker.train_step(step)


class RayRanks:
    """Ranks as Ray actors (see the module docstring)."""

    def __init__(self, template: RankTemplate, world_size: int, each: dict[str, float]) -> None:
        """`each`: what one rank asks of Ray (`art.cluster.ray_cluster.actor_resources`)."""
        self.template = template
        self.world_size = world_size
        self.each = each
        self._actors: list[Any] = []
        self._group: PlacementGroup | None = None

    def start(self) -> list[RankInfo]:
        each = self.each
        bundle = {"CPU": each["num_cpus"], **({"GPU": each["num_gpus"]} if each["num_gpus"] else {})}
        self._group = placement_group([bundle] * self.world_size, strategy="PACK")
        if not self._group.wait(PLACEMENT_TIMEOUT_S):
            free = ray.available_resources()  # type: ignore[no-untyped-call]
            raise self._fail(
                f"Ray could not place {self.world_size} trainer rank(s) of {bundle} within "
                f"{PLACEMENT_TIMEOUT_S:.0f} s; the cluster has {free} free"
            )
        actor_class = ray.remote(RankActor)
        self._actors = [
            actor_class.options(
                num_cpus=each["num_cpus"],
                num_gpus=each["num_gpus"],
                max_restarts=0,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    self._group, placement_group_bundle_index=i
                ),
            ).remote()
            for i in range(self.world_size)
        ]
        device = "cuda:0" if each["num_gpus"] else "cpu"  # Ray gives each actor its GPU as cuda:0
        addr, port = self._wait([self._actors[0].address.remote()], "starting")[0]
        setups = [self.template.setup(i, self.world_size, addr, port, device) for i in range(self.world_size)]
        infos: list[RankInfo] = self._wait(
            [actor.start.remote(setup) for actor, setup in zip(self._actors, setups, strict=True)], "starting"
        )
        return infos

    def run_step(self, step: RankStep, on_micro_batch: MicroBatchCallback | None) -> StepReport:
        """`on_micro_batch` is not called: Ray ranks report when the step ends."""
        reports = self._wait([actor.train_step.remote(step) for actor in self._actors], "training a step")
        report: StepReport = reports[0]
        return report

    def _wait(self, refs: list[Any], doing: str) -> list[Any]:
        """The results of `refs` (one per rank, in rank order); the first failure kills every rank."""
        index = {ref: i for i, ref in enumerate(refs)}
        results: list[Any] = [None] * len(refs)
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=None)
            for ref in ready:
                i = index[ref]
                try:
                    results[i] = ray.get(ref)
                except RayActorError as exc:
                    raise self._fail(f"trainer rank {i} (a Ray actor) died while {doing}: {exc}") from None
                except RayTaskError as exc:
                    raise self._fail(self._cause(i, exc, pending, index, doing)) from None
        return results

    def _cause(
        self, i: int, error: RayTaskError, pending: list[Any], index: dict[Any, int], doing: str
    ) -> str:
        """What failed the step when rank `i` raised `error`: a peer actor that died within `BLAME_GRACE_S`
        (its peers' collectives fail the moment it dies, often first), else rank `i`'s own error."""
        deadline, waiting = time.monotonic() + BLAME_GRACE_S, list(pending)
        while waiting and (left := deadline - time.monotonic()) > 0:
            ready, waiting = ray.wait(waiting, num_returns=1, timeout=left)
            for ref in ready:
                try:
                    ray.get(ref)
                except RayActorError as exc:
                    last_line = str(error).strip().splitlines()[-1] if str(error).strip() else "an error"
                    return (
                        f"trainer rank {index[ref]} (a Ray actor) died while {doing}: {exc} "
                        f"(rank {i} then failed with: {last_line})"
                    )
                except Exception:
                    continue
        return f"trainer rank {i} (a Ray actor) failed while {doing}:\n{error}"

    def actors(self) -> list[Any]:
        """The rank actors, rank 0 first (tests kill one)."""
        return list(self._actors)

    def _fail(self, message: str) -> RankFailure:
        self.stop()
        return RankFailure(f"{message}. Every trainer rank was stopped; they restart before the next step.")

    def stop(self) -> None:
        actors, self._actors = self._actors, []
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        group, self._group = self._group, None
        if group is not None:
            with contextlib.suppress(Exception):
                remove_placement_group(group)
