"""Matmul weights prepacked once for oneDNN on CPUs with bf16 (AVX-512 BF16 / AMX).

`F.linear` on a bf16 CPU tensor reorders the weight into oneDNN's blocked layout on every call; for the
small batches of decoding (M = running sequences) that reorder costs as much as the product itself.
Packing once (`torch.ops.mkldnn._reorder_linear_weight`, what torch.compile's "freezing" does) and calling
`torch.ops.mkldnn._linear_pointwise` measured 1.3-1.6x faster per matmul on SmolLM2's shapes at M = 8-32
on one core (benchmarks/README.md). The result is the same product: tests check it equals `F.linear`.

The packed copy is extra memory (one more copy of every packed weight), so `should_pack` only says yes
for bf16 on CPU when this torch build has the ops, they give the right answer, and the weights are small
next to the machine's memory.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.nn.functional as F

BATCH_HINT = 32  # the M oneDNN tunes the packed layout for (works for every M)


@functools.cache
def packing_works(dtype: torch.dtype) -> bool:
    """True when this torch build packs `dtype` weights for oneDNN and the packed matmul is exact."""
    if dtype != torch.bfloat16 or not torch.backends.mkldnn.is_available():  # type: ignore[no-untyped-call]
        return False
    try:
        generator = torch.Generator().manual_seed(0)
        w = torch.randn(48, 40, generator=generator).to(dtype)
        x = torch.randn(5, 40, generator=generator).to(dtype)
        b = torch.randn(48, generator=generator).to(dtype)
        packed = pack(w)
        return bool(torch.equal(linear(x, packed, b), F.linear(x, w, b)))
    except (RuntimeError, AttributeError, NotImplementedError):
        return False


def should_pack(weights: list[torch.Tensor], *, max_bytes: int = 2 << 30) -> bool:
    """Pack these weights? bf16 on CPU, a torch that can, and at most `max_bytes` of extra memory."""
    if not weights or weights[0].device.type != "cpu":
        return False
    total = sum(w.numel() * w.element_size() for w in weights)
    return total <= max_bytes and packing_works(weights[0].dtype)


def pack(weight: torch.Tensor) -> torch.Tensor:
    """The oneDNN-packed copy of a [out, in] weight."""
    packed: torch.Tensor = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), BATCH_HINT)
    return packed


def linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """`F.linear(x, weight, bias)` with the packed weight, for x of any leading shape."""
    if x.dim() == 2:
        return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")  # type: ignore[no-any-return]
    y = torch.ops.mkldnn._linear_pointwise(x.reshape(-1, x.shape[-1]), packed, bias, "none", [], "")
    out: Any = y.view(*x.shape[:-1], y.shape[-1])
    return out  # type: ignore[no-any-return]
