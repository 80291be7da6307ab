"""What crosses between the service and a trainer rank (a pipe or Ray): its setup, each step, who it is.

Light on purpose (no torch): the supervisor (`ranks`) and a stand-in rank in a test import it without
paying for a model stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from art.trajectories import TrajectoryGroup
from art.types import LoRAConfig, RuntimeOptions, TrainSpec


@dataclass(frozen=True)
class RankTemplate:
    """What every rank of a service shares; `RankTemplate.setup` adds the rank's own place."""

    base_model: str
    dtype: str | None  # the service's resolved dtype, e.g. "float32"
    lora: LoRAConfig
    options: RuntimeOptions
    chat_template: str | None = None
    threads: int | None = None  # torch threads of each rank (CPU)

    def setup(self, rank: int, world_size: int, addr: str, port: int, device: str) -> RankSetup:
        """Rank `rank`'s setup: join the group at `addr:port`, train on `device`."""
        return RankSetup(rank, world_size, addr, port, device, template=self)


@dataclass(frozen=True)
class RankSetup:
    """Everything one rank needs to start (picklable: it crosses a pipe or Ray): its place in the group and
    the template every rank shares."""

    rank: int
    world_size: int
    master_addr: str
    master_port: int
    device: str  # "cpu" or "cuda:N"
    template: RankTemplate
    timeout_s: float = 1800.0  # a collective that waits longer fails

    @property
    def backend(self) -> str:
        """gloo on CPUs, NCCL on GPUs."""
        return "nccl" if self.device.startswith("cuda") else "gloo"


@dataclass(frozen=True)
class RankStep:
    """One step for every rank: the groups, the spec, and where the served state is and the result goes."""

    groups: list[TrajectoryGroup]
    spec: TrainSpec
    current_step: int
    state_dir: str  # the served checkpoint: what every rank starts the step from
    out_dir: str  # where rank 0 saves the trained adapter, optimizer and trainer state


@dataclass
class RankInfo:
    """Who a started rank is (for messages and tests)."""

    rank: int
    pid: int
    host: str
    device: str
    extra: dict[str, Any] = field(default_factory=dict)
