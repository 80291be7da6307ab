"""Causal self-attention for the training forward on CPU: batched matmuls around two C++ softmax kernels.
Opt-in (ART_TRAIN_CPP_ATTENTION=1); by default the trainer uses `F.scaled_dot_product_attention`.

Why it exists: on CPU, SDPA's flash-attention kernel is the largest cost of a training step outside the
projections; its backward runs at ~15-25 GFLOP/s. Alone, forward + backward of one SmolLM2 layer over 8 x 256
tokens take 55-93 ms with SDPA and 30-35 ms here (benchmarks/README.md, "Training"). Why it is not the
default: inside a whole training step it was not reliably faster (same process, steps alternated by
`bench_train_step.py --alternate`: 1.09x, 1.01x and 0.92x in three runs; the cores sat idle more often
with it), and it keeps P, B x H x T^2 values per layer, for backward (SDPA keeps only O and a log-sum-exp).

What it computes, per kv head (the G query heads sharing it stacked as G*T rows, so grouped-query models need
no copies of k and v):

    S = q k^T (the input dtype: bf16 under the trainer's autocast, as Hugging Face's eager attention)
    P = causal_softmax(S * scale)   (float32 inside, rounded once; zeros above the diagonal)
    O = P v

and backward: dV = P^T dO, dP = dO v^T, dS = P * (dP - rowsum(P * dP)) * scale, dQ = dS k, dK = dS^T q.
When on, it is used while P stays under `MAX_SAVED_BYTES` per layer (long sequences use SDPA), and only
where the C++ kernels build and pass their check (`cpp_kernels.usable`).
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.nn.functional as F

from art.inference import cpp_kernels

MAX_SAVED_BYTES = 32 * 2**20
"""Largest P kept for backward per layer call: B x H x T^2 x 2 bytes in bf16 (SmolLM2, 16 x 255 tokens: 18 MiB,
+30% over the layer's other saved activations; 4096 tokens in rows of 400: 28 MiB). Beyond it, SDPA."""


class _CausalAttention(torch.autograd.Function):
    """softmax(q k^T * scale, causal) v for q [B, H, T, D], k and v [B, K, T, D] contiguous, H = G * K."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
        B, H, T, D = q.shape
        K = k.shape[1]
        q_BKRD = q.reshape(B, K, (H // K) * T, D)  # rows: query head g of kv head k, position t
        probs_BKRT = cpp_kernels.causal_softmax(torch.matmul(q_BKRD, k.transpose(-1, -2)), scale)
        out = torch.matmul(probs_BKRT, v)
        ctx.save_for_backward(q_BKRD, k, v, probs_BKRT)
        ctx.scale = scale
        return out.view(B, H, T, D)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, None]:
        q_BKRD, k, v, probs_BKRT = ctx.saved_tensors
        B, H, T, D = grad_out.shape
        grad_BKRD = grad_out.to(probs_BKRT.dtype).reshape(q_BKRD.shape)
        grad_v = torch.matmul(probs_BKRT.transpose(-1, -2), grad_BKRD)
        grad_probs = torch.matmul(grad_BKRD, v.transpose(-1, -2))
        grad_scores = cpp_kernels.causal_softmax_backward(probs_BKRT, grad_probs, ctx.scale)
        grad_q = torch.matmul(grad_scores, k).view(B, H, T, D)
        grad_k = torch.matmul(grad_scores.transpose(-1, -2), q_BKRD)
        return grad_q, grad_k, grad_v, None


def kernels_apply(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether `attention` uses the C++ path for these inputs (else SDPA): CPU, one floating dtype the kernels
    take, contiguous [B, H, T, D] / [B, K, T, D] with H a multiple of K, P within `MAX_SAVED_BYTES`, the
    kernels build and pass their check on this machine, and ART_TRAIN_CPP_ATTENTION is "1" (opt-in)."""
    B, H, T, _ = q.shape
    K = k.shape[1]
    return (
        os.environ.get("ART_TRAIN_CPP_ATTENTION", "0") == "1"
        and q.dtype == k.dtype == v.dtype
        and q.is_contiguous()
        and k.is_contiguous()
        and v.is_contiguous()
        and H % K == 0
        and B * H * T * T * q.element_size() <= MAX_SAVED_BYTES
        and cpp_kernels.usable(q.dtype, q.device)
    )


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Causal attention of q [B, H, T, D] over k, v [B, K, T, D] (K divides H; query head h reads kv head
    h // (H / K), as Hugging Face's `repeat_kv`): [B, H, T, D]. Right-padded rows are fine: real positions
    never attend to later ones."""
    if kernels_apply(q, k, v):
        out: torch.Tensor = _CausalAttention.apply(q, k, v, scale)  # type: ignore[no-untyped-call]
        return out
    return F.scaled_dot_product_attention(
        q, k, v, is_causal=True, scale=scale, enable_gqa=q.shape[1] != k.shape[1]
    )
