"""Which engine a service gets, where it and the trainer run, and starting it: `RuntimeOptions` decides.

- "torch": the built-in `TorchEngine`, in this process, serving the very model object the trainer trains
  (one copy of the base weights).
- "vllm": vLLM's OpenAI server in a subprocess (`art.engines.vllm`), loading its own copy of the base
  model; the trainer's copy is in this process. Placement (`vllm_placement`): on the CPU both share it; on
  a machine with one GPU (or an explicit "cuda:N") both share that GPU and vLLM sleeps while the trainer
  trains; with `device="auto"`/"cuda" and two or more GPUs vLLM serves on cuda:0 and the trainer trains on
  cuda:1, and inference never pauses for long.

`check_engine_available` runs before anything loads, so a missing engine fails in seconds with the fix.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from art.common.waits import waiting

from ..types import RuntimeOptions
from .base import Engine

if TYPE_CHECKING:
    from .placement import DevicePlan

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


@dataclass(frozen=True)
class EngineStart:
    """What starting an engine for one model is given (see `start_engine`)."""

    options: RuntimeOptions
    base_model: str
    served_name: str
    model: Any
    tokenizer: Any
    device: str
    cuda_devices: int
    max_lora_rank: int
    plan: DevicePlan | None = None  # dedicated GPUs (`placement.plan_devices`)


@dataclass(frozen=True)
class EngineKind:
    """One engine `RuntimeOptions.engine` can name: how to check it can run here (before anything loads),
    where the trainer's copy of the model goes, and how to start it."""

    start: Callable[[EngineStart], Awaitable[Engine]]
    check_available: Callable[[RuntimeOptions], None] = lambda options: None
    check_dtype: Callable[[str, str], None] = lambda dtype, device: None  # (dtype name, resolved device)
    trainer_device: Callable[[str, int], str] = lambda device, cuda_devices: device


def trainer_device(options: RuntimeOptions, device: str, cuda_devices: int) -> str:
    """The device the trainer's model loads on, for the resolved inference `device`."""
    return ENGINES[options.engine].trainer_device(device, cuda_devices)


def check_engine_available(options: RuntimeOptions) -> None:
    """Raise a clear error (with the install command) if `options.engine` cannot run here; before any
    model loads."""
    ENGINES[options.engine].check_available(options)


VLLM_BF16_MIN_CAPABILITY = (8, 0)  # vLLM serves bfloat16 on Ampere and newer only


def check_dtype(options: RuntimeOptions, dtype_name: str, device: str) -> None:
    """Raise a clear error (before any model loads) if `options.engine` cannot serve `dtype_name` on `device`
    (a resolved device, "cpu" or "cuda:N"), naming the dtype and what does serve it.

    Both engines take float32, bfloat16 and float16 (on CPUs too: vLLM's CPU build was checked in all three);
    vLLM refuses bfloat16 on GPUs older than compute capability 8.0 (V100, T4)."""
    ENGINES[options.engine].check_dtype(dtype_name.removeprefix("torch."), device)


def _check_vllm_dtype(dtype: str, device: str) -> None:
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


async def start_engine(
    options: RuntimeOptions,
    *,
    base_model: str,
    served_name: str,
    model: Any,
    tokenizer: Any,
    device: str = "cpu",
    cuda_devices: int = 0,
    max_lora_rank: int = 8,
    plan: DevicePlan | None = None,
) -> Engine:
    """Start the engine `options.engine` for `base_model`, served as `served_name`.

    `model` and `tokenizer` are the loaded base model the trainer owns; an engine in this process serves that
    same object (the torch engine), one in another process loads its own copy from `base_model`. `device`
    is the resolved `options.device` ("cpu", "cuda:N"). `plan`: dedicated GPUs (`placement.plan_devices`).
    (With `options.ray_address` the service starts `ray_replicas.start_replicas` instead.)"""
    start = EngineStart(
        options, base_model, served_name, model, tokenizer, device, cuda_devices, max_lora_rank, plan
    )
    return await ENGINES[options.engine].start(start)


async def _start_torch(start: EngineStart) -> Engine:
    from ..engines.torch.torch_engine import TorchEngine
    from ..kernels.threads import in_fresh_thread

    def build() -> TorchEngine:
        return TorchEngine(start.model, start.tokenizer, served_name=start.served_name, options=start.options)

    # The engine's setup does torch work (packing weights): in a thread that ends with it (`kernels.threads`).
    with waiting("starting the torch engine (packing the weights)"):
        return await asyncio.to_thread(in_fresh_thread, build)


def _check_vllm(options: RuntimeOptions) -> None:
    from .vllm.locate import vllm_python

    vllm_python(options.vllm_python)


async def _start_vllm_engine(start: EngineStart) -> Engine:
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
    from ..base_model.default_model import resolve_base_model
    from .vllm.locate import vllm_python
    from .vllm.server_process import LaunchSpec, VllmServer
    from .vllm.vllm_engine import VllmEngine

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


ENGINES: dict[str, EngineKind] = {
    "torch": EngineKind(start=_start_torch),
    "vllm": EngineKind(
        start=_start_vllm_engine,
        check_available=_check_vllm,
        check_dtype=_check_vllm_dtype,
        trainer_device=lambda device, cuda_devices: vllm_placement(device, cuda_devices).trainer_device,
    ),
}
"""Every engine `RuntimeOptions.engine` names (`art.types.EngineName`), by name: a new engine is one entry
here, one in `art.common.engine_traits.ENGINE_TRAITS` (what the light checks ask of it) and its name in
`EngineName`."""
