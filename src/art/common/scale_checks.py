"""The scale-out layouts `RuntimeOptions` refuses when it is made: what can be told without the machine.

Trainer ranks, dedicated GPUs, vLLM's tensor/data parallelism and Ray (DESIGN.md section 10, docs/scale.md)
combine only in some ways; a layout that cannot run fails here with the field and the fix, before anything
loads. What needs the machine (do these GPUs exist? are there cores enough for the ranks?) is checked when
the service starts (`art.cluster.placement.plan_devices`). What differs by engine is asked of its traits
(`art.common.engine_traits.ENGINE_TRAITS`), not of its name. Light: imported by `art.types`.

    >>> from art.types import RuntimeOptions
    >>> RuntimeOptions(engine="vllm", trainer_gpu_ids=(0, 1), inference_gpu_ids=(2,)).ranks
    2
"""

from __future__ import annotations

from typing import Protocol

from art.common.engine_traits import ENGINE_TRAITS, EngineName


class ScaleOptions(Protocol):
    """The fields of `art.types.RuntimeOptions` these checks read (named here: this floor imports nothing above)."""

    @property
    def engine(self) -> EngineName: ...
    @property
    def trainer_gpu_ids(self) -> tuple[int, ...] | None: ...
    @property
    def inference_gpu_ids(self) -> tuple[int, ...] | None: ...
    @property
    def tensor_parallel_size(self) -> int: ...
    @property
    def inference_replicas(self) -> int: ...
    @property
    def ray_address(self) -> str | None: ...
    @property
    def ranks(self) -> int: ...


def _check_ids(field: str, ids: tuple[int, ...]) -> None:
    if not ids:
        raise ValueError(f"{field} is empty: name at least one GPU, or leave both GPU id lists out")
    if any(i < 0 for i in ids):
        raise ValueError(f"{field}={list(ids)}: GPU ids are CUDA indices, 0 or more")
    if len(set(ids)) != len(ids):
        raise ValueError(f"{field}={list(ids)} names a GPU twice: give each GPU once")


def check_scale_options(options: ScaleOptions) -> None:
    """Raise ValueError naming the field and the fix for a layout that cannot run (see the module docstring)."""
    trainer, inference = options.trainer_gpu_ids, options.inference_gpu_ids
    engine = ENGINE_TRAITS[options.engine]
    if (trainer is None) != (inference is None):
        raise ValueError(
            "trainer_gpu_ids and inference_gpu_ids go together (dedicated mode: the trainer on its GPUs, "
            "inference on its own): set both or neither"
        )
    if trainer is not None and inference is not None:
        _check_ids("trainer_gpu_ids", trainer)
        _check_ids("inference_gpu_ids", inference)
        shared = sorted(set(trainer) & set(inference))
        if shared:
            raise ValueError(
                f"trainer_gpu_ids={list(trainer)} and inference_gpu_ids={list(inference)} overlap on GPU(s) "
                f"{shared}: dedicated GPUs are either the trainer's or inference's"
            )
        if options.ranks > len(trainer):
            raise ValueError(
                f"train_ranks={options.ranks} but trainer_gpu_ids={list(trainer)} has {len(trainer)} GPU(s): "
                "one rank per GPU; give fewer ranks or more GPU ids"
            )
        if options.ray_address is None:
            wanted = options.tensor_parallel_size * options.inference_replicas
            if engine.parallel_devices and wanted != len(inference):
                raise ValueError(
                    f"inference_gpu_ids={list(inference)} has {len(inference)} GPU(s) but tensor_parallel_size="
                    f"{options.tensor_parallel_size} x inference_replicas={options.inference_replicas} = {wanted}: "
                    "give as many inference GPUs as vLLM uses"
                )
            if engine.in_process:
                raise ValueError(
                    "trainer_gpu_ids/inference_gpu_ids (dedicated mode) serve with vLLM on its own GPUs: set "
                    "engine='vllm' (the torch engine shares its model with the trainer in this process)"
                )
    if options.ray_address is None and not engine.parallel_devices:
        for field, value in (
            ("inference_replicas", options.inference_replicas),
            ("tensor_parallel_size", options.tensor_parallel_size),
        ):
            if value > 1:
                raise ValueError(
                    f"{field}={value} needs engine='vllm' (its own parallelism) or a Ray cluster "
                    "(ray_address, art.ray.RayBackend): the torch engine in this process is one replica"
                )
    spans = options.tensor_parallel_size > 1 or options.inference_replicas > 1
    if engine.parallel_devices and inference is None and options.ray_address is None and spans:
        raise ValueError(
            f"tensor_parallel_size={options.tensor_parallel_size}, inference_replicas="
            f"{options.inference_replicas}: vLLM spans several GPUs only on dedicated ones; name them "
            "with inference_gpu_ids (and the trainer's with trainer_gpu_ids)"
        )
    if options.ray_address is not None and (trainer is not None or options.tensor_parallel_size > 1):
        raise ValueError(
            "with ray_address, Ray places replicas and ranks (one GPU each on a GPU cluster): leave "
            "trainer_gpu_ids, inference_gpu_ids and tensor_parallel_size out"
        )
