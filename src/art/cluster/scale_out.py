"""How a service reaches beyond its own process: its device plan, its trainer ranks, its Ray cluster.

`ModelService.start` calls `plan` before anything loads (a layout this machine or cluster cannot run fails
there, naming the field and the fix: GPU ids that do not exist, more ranks than cores, a Ray address that
does not answer) and `start_ranks` once its own trainer is built. Which backend the ranks get follows the
options: `ray_address` -> Ray actors (`art.cluster.ray_ranks`), else processes of this machine
(`art.training.distributed.ranks.LocalRanks`) on the plan's devices. `train_ranks=1` starts nothing.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from art.cluster.placement import DevicePlan, plan_devices
from art.types import RuntimeOptions

if TYPE_CHECKING:
    from art.engines.base import Engine
    from art.record.storage import ModelStorage
    from art.training.distributed.ranks import RankGroup
    from art.training.trainer import Trainer
    from art.types import LoRAConfig


def plan(options: RuntimeOptions, device: str, cuda_devices: int) -> DevicePlan:
    """The service's device plan (`art.cluster.placement`); with `ray_address`, the cluster is reached and
    checked first (`art.cluster.ray_cluster.connect`)."""
    if options.ray_address is not None:
        from art.cluster.ray_cluster import connect

        connect(options.ray_address, options)
    return plan_devices(options, device, cuda_devices=cuda_devices, cpu_cores=os.cpu_count() or 1)


async def start_engine(options: RuntimeOptions, *, plan: DevicePlan, **engine_args: Any) -> Engine:
    """The service's engine: `inference_replicas` Ray actors behind one (`art.cluster.replicas`) with
    `ray_address`, else `art.engines.factory.start_engine` on the plan's devices (`engine_args`: its keywords)."""
    if options.ray_address is not None:
        from art.cluster.replicas import start_replicas

        return await start_replicas(
            options,
            base_model=engine_args["base_model"],
            served_name=engine_args.get("served_name") or engine_args["base_model"],
            tokenizer=engine_args["tokenizer"],
        )
    from art.engines.factory import start_engine as start_local_engine

    return await start_local_engine(options, plan=plan, **engine_args)


def start_ranks(
    device_plan: DevicePlan,
    *,
    base_model: str,
    lora: LoRAConfig,
    chat_template: str | None,
    options: RuntimeOptions,
    storage: ModelStorage,
    trainer: Trainer,
    dtype: str,
) -> RankGroup | None:
    """Start the service's trainer ranks (blocking until they have loaded the model); None for one rank."""
    from art.training.distributed.rank_messages import RankTemplate
    from art.training.distributed.ranks import LocalRanks, RankBackend, RankGroup

    world_size = options.ranks
    if world_size == 1:
        return None
    template = RankTemplate(
        base_model=base_model,
        dtype=dtype.removeprefix("torch."),
        lora=lora,
        options=options,
        chat_template=chat_template,
        threads=None
        if device_plan.rank_devices[:1] != ("cpu",)
        else max(1, (os.cpu_count() or 1) // world_size),
    )
    backend: RankBackend
    if options.ray_address is not None:
        from art.cluster.ray_cluster import actor_resources, cluster_resources
        from art.cluster.ray_ranks import RayRanks

        backend = RayRanks(template, world_size, actor_resources(options, cluster_resources()))
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
