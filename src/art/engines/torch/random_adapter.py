"""Random-weight PEFT LoRA adapters, for tests and benchmarks (which must serve a real adapter).

`save_random_adapter(base, out)` writes a PEFT folder (adapter_config.json + adapter_model.safetensors)
exactly as the trainer's checkpoints look, with both A and B random (PEFT's own init leaves B = 0, which
would make every adapter equal to the base model), scaled by `scale`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import torch

from art.engines.torch.lora import LORA_TARGETS


def save_random_adapter(
    base_model: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    seed: int = 0,
    rank: int = 8,
    alpha: int = 16,
    targets: Sequence[str] = LORA_TARGETS,
    scale: float = 1.0,
) -> Path:
    """Write a random LoRA adapter for the model in folder `base_model` into `out`; returns `out`."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(base_model), dtype=torch.float32)
    config = LoraConfig(r=rank, lora_alpha=alpha, target_modules=list(targets), init_lora_weights=False)
    peft_model = get_peft_model(model, config)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * scale / param.shape[-1] ** 0.5)
    out_dir = Path(out)
    peft_model.save_pretrained(str(out_dir), safe_serialization=True)
    return out_dir
