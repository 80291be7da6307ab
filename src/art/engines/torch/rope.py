"""Rotary position embeddings for the compact forward: cos/sin tables computed once from the model config.

Reads `config.rope_parameters` (transformers 5) or the older `rope_theta` / `rope_scaling` attributes.
Supported rope types: "default", and the position-independent scalings "linear", "llama3" and "yarn"
(their inverse frequencies come from transformers' own `ROPE_INIT_FUNCTIONS`, so they match the HF model).
Types whose frequencies change with the sequence length ("dynamic", "longrope") are refused with a clear
error. The tables are computed exactly as transformers does (float32 `position * inv_freq`, then cos/sin
times the attention scaling, then cast to the model dtype) so the compact forward matches HF's logits.
"""

from __future__ import annotations

from typing import Any

import torch

SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "yarn")


def rope_parameters(config: Any) -> dict[str, Any]:
    """The rope parameters of a HF config as a dict with at least `rope_type` and `rope_theta`."""
    params = getattr(config, "rope_parameters", None)
    if isinstance(params, dict) and "rope_theta" in params:
        out = dict(params)
    else:  # transformers 4.x style
        out = dict(getattr(config, "rope_scaling", None) or {})
        out["rope_theta"] = float(getattr(config, "rope_theta", 10000.0))
    out["rope_type"] = out.get("rope_type", out.get("type", "default")) or "default"
    return out


def inverse_frequencies(config: Any, head_dim: int) -> tuple[torch.Tensor, float]:
    """(inv_freq [head_dim/2] float32, attention scaling) for `config`; raises for unsupported rope types."""
    params = rope_parameters(config)
    rope_type = params["rope_type"]
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise ValueError(
            f"rope type {rope_type!r} is not supported by the built-in engine; "
            f"supported: {', '.join(SUPPORTED_ROPE_TYPES)}"
        )
    if (
        float(params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0)) or 1.0)
        != 1.0
    ):
        raise ValueError("partial rotary embeddings are not supported by the built-in engine")
    if rope_type == "default":
        base = float(params["rope_theta"])
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        return inv_freq, 1.0
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    inv_freq, scaling = ROPE_INIT_FUNCTIONS[rope_type](config, torch.device("cpu"))
    return inv_freq.float(), float(scaling)


def rope_tables(
    config: Any, head_dim: int, max_positions: int, *, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos_PD, sin_PD) for positions 0..max_positions-1, each [P, head_dim] in `dtype`."""
    inv_freq_F, scaling = inverse_frequencies(config, head_dim)
    positions_P = torch.arange(max_positions, dtype=torch.int64).float()
    freqs_PF = positions_P[:, None] * inv_freq_F[None, :]
    emb_PD = torch.cat((freqs_PF, freqs_PF), dim=-1)
    cos_PD = (emb_PD.cos() * scaling).to(device=device, dtype=dtype)
    sin_PD = (emb_PD.sin() * scaling).to(device=device, dtype=dtype)
    return cos_PD, sin_PD


def signed_sin(sin_PD: torch.Tensor) -> torch.Tensor:
    """The sin table with its first half negated, as `apply_rope` takes it."""
    half = sin_PD.shape[-1] // 2
    return torch.cat((-sin_PD[..., :half], sin_PD[..., half:]), dim=-1)


def apply_rope(x_BTHD: torch.Tensor, cos_BT1D: torch.Tensor, signed_sin_BT1D: torch.Tensor) -> torch.Tensor:
    """x rotated by the given per-token angles (the "rotate half" convention of Llama/Qwen).

    rotate_half(x) * sin == roll(x, half) * signed_sin elementwise (the sign moves from x onto the table),
    so this is HF's `x * cos + rotate_half(x) * sin` to the bit, in four ops instead of six.
    """
    rolled = x_BTHD.roll(x_BTHD.shape[-1] // 2, dims=-1)
    return (x_BTHD * cos_BT1D).add_(rolled.mul_(signed_sin_BT1D))
