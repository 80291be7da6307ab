"""Starting vLLM's OpenAI server for a service: where it runs (`vllm_placement`), what it may serve
(`check_vllm_dtype`), and the start itself (`start_vllm_engine`): its `KIND` is what
`art.engines.factory` asks of the vllm engine. Light at import: torch and the server's modules load when a start runs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from art.common.waits import waiting
from art.engines.base import Engine, EngineKind, EngineStart
from art.types import RuntimeOptions

VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # the values vLLM's --max-lora-rank accepts
SHARED_GPU_MEMORY_UTILIZATION = 0.6  # vLLM's share of a GPU the trainer uses too (its default is 0.9)


@dataclass(frozen=True)
class VllmPlacement:
    """Where vLLM serves (a CUDA index, None: the CPU), where the trainer trains, and whether vLLM sleeps."""

    gpu: int | None
    trainer_device: str
    sleep_mode: bool


def vllm_placement(device: str, cuda_devices: int) -> VllmPlacement:
    """Placement for a resolved device ("cpu", "cuda:N") on a machine with `cuda_devices` GPUs.

    Example:
        vllm_placement("cuda:0", 2)  # VllmPlacement(gpu=0, trainer_device="cuda:1", sleep_mode=False)
    """
    if not device.startswith("cuda"):
        return VllmPlacement(gpu=None, trainer_device="cpu", sleep_mode=False)
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    if cuda_devices >= 2 and index == 0:
        return VllmPlacement(gpu=0, trainer_device="cuda:1", sleep_mode=False)
    return VllmPlacement(gpu=index, trainer_device=f"cuda:{index}", sleep_mode=True)


VLLM_BF16_MIN_CAPABILITY = (8, 0)  # vLLM serves bfloat16 on Ampere and newer only


def check_vllm_dtype(dtype: str, device: str) -> None:
    if dtype != "bfloat16" or not device.startswith("cuda"):
        return
    gpu = vllm_placement(device, _cuda_count()).gpu or 0
    capability = _cuda_capability(gpu)
    if capability < VLLM_BF16_MIN_CAPABILITY:
        raise ValueError(
            f"dtype=bfloat16: the vllm engine cannot serve it on cuda:{gpu} (compute capability "
            f"{capability[0]}.{capability[1]}; vLLM needs {VLLM_BF16_MIN_CAPABILITY[0]}.0 or newer for bf16). "
            'Use dtype="float16" (vllm and torch serve it there) or engine="torch" (serves bfloat16 anywhere)'
        )


def _cuda_count() -> int:
    import torch

    return int(torch.cuda.device_count())


def _cuda_capability(index: int) -> tuple[int, int]:
    import torch

    major, minor = torch.cuda.get_device_capability(index)
    return int(major), int(minor)


def check_vllm(options: RuntimeOptions) -> None:
    from art.engines.vllm.locate import vllm_python

    vllm_python(options.vllm_python)


async def start_vllm_engine(start: EngineStart) -> Engine:
    options, plan = start.options, start.plan
    placement = vllm_placement(start.device, start.cuda_devices)
    if plan is not None and plan.dedicated:  # vLLM on GPUs of its own, with its parallelism flags
        placement = VllmPlacement(gpu=plan.vllm_gpu, trainer_device=plan.trainer_device, sleep_mode=False)
        options = options.model_copy(
            update={
                "vllm_args": (*plan.vllm_args, *options.vllm_args),
                "vllm_env": {**plan.vllm_env, **options.vllm_env},
            }
        )
    return await _start_vllm(
        options,
        base_model=start.base_model,
        served_name=start.served_name,
        tokenizer=start.tokenizer,
        dtype=str(start.model.dtype),
        placement=placement,
        max_lora_rank=start.max_lora_rank,
    )


async def _start_vllm(
    options: RuntimeOptions,
    *,
    base_model: str,
    served_name: str,
    tokenizer: Any,
    dtype: str,
    placement: VllmPlacement,
    max_lora_rank: int,
) -> Engine:
    from art.base_model.default_model import resolve_base_model
    from art.engines.vllm.locate import vllm_python
    from art.engines.vllm.server_process import LaunchSpec, VllmServer
    from art.engines.vllm.vllm_engine import VllmEngine

    memory_share = options.vllm_gpu_memory_utilization
    if memory_share is None and placement.sleep_mode:
        memory_share = SHARED_GPU_MEMORY_UTILIZATION
    max_len = options.max_model_len
    spec = LaunchSpec(
        python=vllm_python(options.vllm_python),
        model=str(resolve_base_model(base_model)),
        served_name=served_name,
        max_lora_rank=next(r for r in VLLM_LORA_RANKS if r >= max_lora_rank),
        dtype=dtype.removeprefix("torch."),
        max_model_len=max_len,
        max_num_seqs=options.max_num_seqs,
        gpu=placement.gpu,
        sleep_mode=placement.sleep_mode,
        gpu_memory_utilization=memory_share,
        extra_args=options.vllm_args,
        extra_env=options.vllm_env,
    )
    server = VllmServer(spec)
    with waiting(f"starting vLLM for {base_model} (a first start takes minutes)", every=30):
        await asyncio.to_thread(server.start, options.vllm_startup_timeout)
    return VllmEngine(
        server,
        tokenizer,
        served_name=served_name,
        compute_dtype=dtype,
        max_model_len=await asyncio.to_thread(server.max_model_len),
        sleep_mode=placement.sleep_mode,
    )


KIND = EngineKind(
    start=start_vllm_engine,
    check_available=check_vllm,
    check_dtype=check_vllm_dtype,
    trainer_device=lambda device, cuda_devices: vllm_placement(device, cuda_devices).trainer_device,
)
"""vLLM: found (its Python) before anything loads, bf16 only where the GPU serves it, its own placement."""
