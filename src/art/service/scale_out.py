"""How a service reaches beyond its own process: its device plan, its trainer ranks, its Ray cluster.

`ModelService.start` calls `plan` before anything loads (a layout this machine or cluster cannot run fails
there, naming the field and the fix: GPU ids that do not exist, more ranks than cores, a Ray address that
does not answer) and `start_ranks` once its own trainer is built. Which backend the ranks get follows the
options: `ray_address` -> Ray actors (`art.ray.ranks`), else processes of this machine
(`art.training.ranks.LocalRanks`) on the plan's devices. `train_ranks=1` starts nothing.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..engines.placement import DevicePlan, plan_devices
from ..types import RuntimeOptions

if TYPE_CHECKING:
    from ..storage import ModelStorage
    from ..training.ranks import RankGroup
    from ..training.trainer import Trainer
    from .service import ServiceConfig


def plan(options: RuntimeOptions, device: str, cuda_devices: int) -> DevicePlan:
    """The service's device plan (`art.engines.placement`); with `ray_address`, the cluster is reached and
    checked first (`art.ray.cluster.connect`)."""
    if options.ray_address is not None:
        from ..ray.cluster import connect

        connect(options.ray_address, options)
    return plan_devices(options, device, cuda_devices=cuda_devices, cpu_cores=os.cpu_count() or 1)


def start_ranks(
    device_plan: DevicePlan,
    config: ServiceConfig,
    storage: ModelStorage,
    trainer: Trainer,
    dtype: str,
) -> RankGroup | None:
    """Start the service's trainer ranks (blocking until they have loaded the model); None for one rank."""
    from ..training.ranks import LocalRanks, RankBackend, RankGroup, RankTemplate

    options = config.options
    world_size = options.ranks
    if world_size == 1:
        return None
    template = RankTemplate(
        base_model=config.base_model,
        dtype=dtype.removeprefix("torch."),
        lora=config.lora,
        options=options,
        chat_template=config.chat_template,
        threads=None
        if device_plan.rank_devices[:1] != ("cpu",)
        else max(1, (os.cpu_count() or 1) // world_size),
    )
    backend: RankBackend
    if options.ray_address is not None:
        from ..ray.ranks import RayRanks

        backend = RayRanks(template, world_size)
    else:
        backend = LocalRanks(template, device_plan.rank_devices)
    group = RankGroup(
        backend,
        trainer=trainer,
        checkpoint_dir=storage.checkpoint_dir,
        scratch_dir=storage.new_checkpoint_tmp_dir,
    )
    group.start()
    return group
