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

import importlib
from typing import Any

from art.common.engine_traits import ENGINE_TRAITS
from art.engines.base import Engine, EngineKind, EngineStart
from art.engines.devices import DevicePlan
from art.types import EngineName, RuntimeOptions


def trainer_device(options: RuntimeOptions, device: str, cuda_devices: int) -> str:
    """The device the trainer's model loads on, for the resolved inference `device`."""
    return engine_kind(options.engine).trainer_device(device, cuda_devices)


def check_engine_available(options: RuntimeOptions) -> None:
    """Raise a clear error (with the install command) if `options.engine` cannot run here; before any
    model loads."""
    engine_kind(options.engine).check_available(options)


def check_dtype(options: RuntimeOptions, dtype_name: str, device: str) -> None:
    """Raise a clear error (before any model loads) if `options.engine` cannot serve `dtype_name` on `device`
    (a resolved device, "cpu" or "cuda:N"), naming the dtype and what does serve it.

    Both engines take float32, bfloat16 and float16 (on CPUs too: vLLM's CPU build was checked in all three);
    vLLM refuses bfloat16 on GPUs older than compute capability 8.0 (V100, T4)."""
    engine_kind(options.engine).check_dtype(dtype_name.removeprefix("torch."), device)


async def start_engine(
    options: RuntimeOptions,
    *,
    base_model: str,
    served_name: str | None = None,
    model: Any,
    tokenizer: Any,
    device: str = "cpu",
    cuda_devices: int = 0,
    max_lora_rank: int = 8,
    plan: DevicePlan | None = None,
) -> Engine:
    """Start the engine `options.engine` for `base_model`, served as `served_name` (default: `base_model`).

    `model` and `tokenizer` are the loaded base model the trainer owns; an engine in this process serves that
    same object (the torch engine), one in another process loads its own copy from `base_model`. `device`
    is the resolved `options.device` ("cpu", "cuda:N"). `plan`: dedicated GPUs (`placement.plan_devices`).
    (With `options.ray_address` the service starts `ray_replicas.start_replicas` instead.)"""
    served = served_name or base_model
    start = EngineStart(
        options, base_model, served, model, tokenizer, device, cuda_devices, max_lora_rank, plan
    )
    return await engine_kind(options.engine).start(start)


def engine_kind(name: EngineName) -> EngineKind:
    """How the engine `name` is checked and started: the `KIND` of its start module
    (`art.common.engine_traits.ENGINE_TRAITS[name].start_module`), imported now."""
    kind: EngineKind = importlib.import_module(ENGINE_TRAITS[name].start_module).KIND
    return kind
