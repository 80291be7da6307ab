"""Which device every process of a service gets: the engine, the service's own trainer, the trainer ranks.

`plan_devices(options, device, cuda_devices, cpu_cores)` decides it once, when the service starts and before
any model loads; a layout this machine cannot run raises ValueError naming the field and the fix.

- One device (the default): the engine and the trainer share it, as before (`art.engines.vllm.start.vllm_placement`), and
  `train_ranks=N` on a CPU runs N gloo ranks there (at most one per core).
- Dedicated mode (`trainer_gpu_ids` + `inference_gpu_ids`, the reference's names): vLLM's server is given the
  inference GPUs (`CUDA_VISIBLE_DEVICES`), spread with `--tensor-parallel-size` and `--data-parallel-size`
  (`inference_replicas`); rank i trains on `cuda:{trainer_gpu_ids[i]}` with NCCL; the service's own
  trainer copy (the canary's reference logprobs, checkpoint saves) sits on the first trainer GPU.
  Inference never pauses for a step: vLLM keeps serving the published step and switches when the new one
  is published.
- Ray (`ray_address`): Ray places replicas and ranks (`art.ray`); here only the service's own trainer copy
  needs a device (this process's).

    >>> from art.types import RuntimeOptions
    >>> plan = plan_devices(RuntimeOptions(engine="vllm", trainer_gpu_ids=(0, 1), inference_gpu_ids=(2, 3),
    ...                                    tensor_parallel_size=2), "cuda", cuda_devices=4, cpu_cores=8)
    >>> plan.rank_devices, plan.vllm_env, plan.vllm_args
    (('cuda:0', 'cuda:1'), {'CUDA_VISIBLE_DEVICES': '2,3'}, ('--tensor-parallel-size', '2'))
"""

from __future__ import annotations

from art.engines.devices import DevicePlan
from art.engines.factory import trainer_device
from art.types import RuntimeOptions

__all__ = ["DevicePlan", "plan_devices"]


def _gpu_list(ids: tuple[int, ...]) -> str:
    return ",".join(map(str, ids))


def _check_exist(field_name: str, ids: tuple[int, ...], cuda_devices: int) -> None:
    missing = [i for i in ids if i >= cuda_devices]
    if not missing:
        return
    have = "no CUDA GPU" if cuda_devices == 0 else f"{cuda_devices} CUDA GPU(s): 0-{cuda_devices - 1}"
    raise ValueError(
        f"{field_name}={list(ids)}: GPU(s) {missing} do not exist; this machine has {have} (set "
        "CUDA_VISIBLE_DEVICES before starting, or give ids that exist)"
    )


def plan_devices(options: RuntimeOptions, device: str, *, cuda_devices: int, cpu_cores: int) -> DevicePlan:
    """The plan for `options` on a machine with `cuda_devices` GPUs and `cpu_cores` cores; `device` is the
    resolved `options.device` ("cpu", "cuda", "cuda:N"). ValueError for a layout this machine cannot run."""
    ranks = options.ranks
    if options.ray_address is not None:
        return DevicePlan(engine_device=device, trainer_device=device, pause_while_training=False)
    trainer, inference = options.trainer_gpu_ids, options.inference_gpu_ids
    if trainer is not None and inference is not None:  # dedicated mode (checked against each other already)
        _check_exist("trainer_gpu_ids", trainer, cuda_devices)
        _check_exist("inference_gpu_ids", inference, cuda_devices)
        args: tuple[str, ...] = ()
        if options.tensor_parallel_size > 1:
            args += ("--tensor-parallel-size", str(options.tensor_parallel_size))
        if options.inference_replicas > 1:
            args += ("--data-parallel-size", str(options.inference_replicas))
        return DevicePlan(
            engine_device=f"cuda:{inference[0]}",
            trainer_device=f"cuda:{trainer[0]}",
            rank_devices=tuple(f"cuda:{i}" for i in trainer[:ranks]) if ranks > 1 else (),
            dedicated=True,
            vllm_gpu=inference[0],
            vllm_env={"CUDA_VISIBLE_DEVICES": _gpu_list(inference)},
            vllm_args=args,
            pause_while_training=False,
        )
    shared = DevicePlan(engine_device=device, trainer_device=trainer_device(options, device, cuda_devices))
    if ranks == 1:
        return shared
    if device.startswith("cuda"):
        raise ValueError(
            f"train_ranks={ranks} on GPUs: name the GPUs that train and the ones that serve, "
            "trainer_gpu_ids=[...] and inference_gpu_ids=[...] with engine='vllm' (docs/scale.md)"
        )
    if ranks > cpu_cores:
        raise ValueError(
            f"train_ranks={ranks} but this machine has {cpu_cores} CPU core(s): a gloo rank needs one of its "
            f"own; give train_ranks<={cpu_cores}, or run the ranks on a cluster (art.ray.RayBackend)"
        )
    return DevicePlan(
        engine_device=device, trainer_device=shared.trainer_device, rank_devices=("cpu",) * ranks
    )
