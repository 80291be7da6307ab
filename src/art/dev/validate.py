"""Checks of an `InternalModelConfig`'s GPU layout, as the reference makes them before a model loads.

Dedicated mode is the reference's name for training and inference on separate GPUs: both
`trainer_gpu_ids` and `inference_gpu_ids` set. `LocalBackend` runs `validate_dedicated_config` on every
model's `_internal_config` when the model registers, so a layout the reference refuses is refused here
too, with the same reasons, before anything loads. (Which GPUs our service then uses is set by
`LocalBackend(device=...)`; see docs/gpu.md.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def is_dedicated_mode(config: Mapping[str, Any]) -> bool:
    """True when `config` names separate training and inference GPUs (both id lists set).

    Example:
        >>> is_dedicated_mode({"trainer_gpu_ids": [0], "inference_gpu_ids": [1]})
        True
        >>> is_dedicated_mode({})
        False
    """
    return "trainer_gpu_ids" in config and "inference_gpu_ids" in config


def validate_dedicated_config(config: Mapping[str, Any]) -> None:
    """Raise `ValueError` naming the setting when `config`'s GPU layout cannot run; shared mode passes.

    The rules: both id lists or neither; `rollout_weights_mode` is "lora" or "merged", and "merged"
    needs dedicated mode; `init_args.fast_inference` is gone; in dedicated mode both lists are
    non-empty and disjoint, inference uses exactly one GPU, training uses GPUs 0..n-1 in order, and
    `engine_args.enable_sleep_mode` is off (sleep mode is how a shared GPU switches roles).

    Example:
        >>> validate_dedicated_config({"trainer_gpu_ids": [0], "inference_gpu_ids": [1]})
        >>> validate_dedicated_config({"trainer_gpu_ids": [0]})
        Traceback (most recent call last):
        ...
        ValueError: trainer_gpu_ids and inference_gpu_ids must both be set or both unset
    """
    dedicated = is_dedicated_mode(config)
    if dedicated != ("trainer_gpu_ids" in config or "inference_gpu_ids" in config):
        raise ValueError("trainer_gpu_ids and inference_gpu_ids must both be set or both unset")
    mode = config.get("rollout_weights_mode", "lora")
    if mode not in ("lora", "merged"):
        raise ValueError(f"rollout_weights_mode must be either 'lora' or 'merged', got {mode!r}")
    if mode == "merged" and not dedicated:
        raise ValueError(
            "rollout_weights_mode='merged' requires dedicated mode (set both trainer_gpu_ids and inference_gpu_ids)"
        )
    if "fast_inference" in (config.get("init_args") or {}):
        raise ValueError(
            "init_args.fast_inference is no longer supported: remove it (inference always runs in its own engine)"
        )
    if not dedicated:
        return
    trainer, inference = list(config["trainer_gpu_ids"]), list(config["inference_gpu_ids"])
    if not trainer:
        raise ValueError("trainer_gpu_ids must be non-empty")
    if not inference:
        raise ValueError("inference_gpu_ids must be non-empty")
    if set(trainer) & set(inference):
        raise ValueError(
            f"trainer_gpu_ids and inference_gpu_ids must not overlap (both have {sorted(set(trainer) & set(inference))})"
        )
    if len(inference) > 1:
        raise ValueError(
            f"inference_gpu_ids must have exactly one GPU: Multi-GPU inference not yet supported, got {inference}"
        )
    if trainer[0] != 0:
        raise ValueError(f"trainer_gpu_ids must start at GPU 0 (e.g. [0] or [0, 1]), got {trainer}")
    if trainer != list(range(len(trainer))):
        raise ValueError(f"trainer_gpu_ids must be contiguous starting from 0 (e.g. [0, 1]), got {trainer}")
    if (config.get("engine_args") or {}).get("enable_sleep_mode"):
        raise ValueError(
            "engine_args.enable_sleep_mode is incompatible with dedicated mode (only a GPU shared by "
            "trainer and engine sleeps): remove it or drop the GPU id lists"
        )
