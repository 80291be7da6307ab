"""Where each process of one service runs: `DevicePlan`, what an engine is started with.

`art.cluster.placement.plan_devices` decides it (before any model loads); the engines read it (vLLM's GPUs
in dedicated mode, its parallelism flags), and the trainer ranks their devices.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DevicePlan:
    """Where each process of one service runs (see the module docstring)."""

    engine_device: str  # the resolved device the engine is told ("cpu", "cuda:N")
    trainer_device: str  # the service's in-process trainer (the only trainer when there are no ranks)
    rank_devices: tuple[str, ...] = ()  # one per trainer rank; () = no rank processes (or Ray places them)
    dedicated: bool = False  # vLLM on GPUs of its own (dedicated mode)
    vllm_gpu: int | None = None  # the first GPU vLLM is given (dedicated mode)
    vllm_env: dict[str, str] = field(default_factory=dict)
    vllm_args: tuple[str, ...] = ()
    pause_while_training: bool = True  # hold inference during a step (the engine shares a device or model)
