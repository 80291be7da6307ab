"""Loading a base model and tokenizer for serving (and for the trainer that shares it), and picking dtype.

Names go through `art.base_model.default_model.resolve_base_model` first, so short names such as
"smollm2-135m" load the cached local copy of the embedded default model; anything else is a Hugging Face
id or a local folder, loaded with `AutoModelForCausalLM` / `AutoTokenizer` (safetensors only).

dtype: bf16 where the hardware computes it natively (CUDA with bf16 support; CPUs with AVX-512 BF16 or AMX),
float32 otherwise. Either can be forced with `dtype=`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from art.base_model.default_model import resolve_base_model
from art.types import DTYPE_NAMES

_DTYPES: dict[str, torch.dtype] = {name: getattr(torch, dtype) for name, dtype in DTYPE_NAMES.items()}


def cpu_supports_bf16() -> bool:
    """Whether this CPU has native bf16 arithmetic (AVX-512 BF16 or AMX), per /proc/cpuinfo or torch."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        flags = ""
    if "avx512_bf16" in flags or "amx_bf16" in flags:
        return True
    # Apple silicon and other non-Linux hosts: trust torch's own capability report when it names AMX.
    capability = str(getattr(torch.backends.cpu, "get_cpu_capability", lambda: "")())
    return "AMX" in capability.upper()


def cuda_device_count() -> int:
    """How many CUDA devices this process sees (0 without CUDA)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def cuda_device_name(device: str) -> str:
    """The name of a CUDA device ("cuda", "cuda:N"), e.g. "NVIDIA H200"."""
    return str(torch.cuda.get_device_name(torch.device(device)))


def resolve_device(setting: str = "auto") -> torch.device:
    """The torch device for a `RuntimeOptions.device` setting: "auto" takes the first CUDA GPU where there is
    one, else the CPU; "cuda" / "cuda:N" must exist (ValueError naming what this machine has otherwise).

    Example:
        resolve_device("auto")  # device(type='cpu') on a machine without a GPU
    """
    setting = setting.strip().lower()
    available = cuda_device_count()
    if setting == "auto":
        return torch.device("cuda:0") if available else torch.device("cpu")
    if setting == "cpu":
        return torch.device("cpu")
    if setting == "cuda" or setting.startswith("cuda:"):
        index = 0 if setting == "cuda" else int(setting.split(":", 1)[1])
        if index >= available:
            found = (
                "no CUDA device"
                if not available
                else f"{available} CUDA device(s) (cuda:0..cuda:{available - 1})"
            )
            raise ValueError(
                f"device={setting!r}, but this machine has {found}"
                f"{' (torch was built without CUDA)' if torch.version.cuda is None else ''}; "
                'use device="cpu" or "auto"'
            )
        return torch.device(f"cuda:{index}")
    raise ValueError(f'device={setting!r}: use "auto", "cpu", "cuda" or "cuda:N"')


def choose_dtype(dtype: str | torch.dtype | None = None, device: str | torch.device = "cpu") -> torch.dtype:
    """The dtype to serve in: `dtype` when given ("bf16", "float32", a torch.dtype ...), else the fastest exact one."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and dtype != "auto":
        try:
            return _DTYPES[dtype.lower()]
        except KeyError:
            raise ValueError(f"unknown dtype {dtype!r}; use one of {', '.join(sorted(_DTYPES))}") from None
    if torch.device(device).type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if cpu_supports_bf16() else torch.float32


def load_model_and_tokenizer(
    base_model: str, *, dtype: torch.dtype, device: str | torch.device = "cpu"
) -> tuple[Any, Any]:
    """(model, tokenizer) for `base_model` (short name, HF id or local folder), in eval mode on `device`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from art.common.waits import waiting

    source = resolve_base_model(base_model)  # converting the default model says so itself
    with waiting(f"loading {base_model} ({str(dtype).removeprefix('torch.')}, {device})"):
        tokenizer = AutoTokenizer.from_pretrained(source)
        model: Any = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, use_safetensors=True)
        model.to(device)
        model.eval()
    return model, tokenizer
