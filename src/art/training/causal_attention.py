"""Causal self-attention for the training forward on CPU: batched matmuls around two C++ softmax kernels.
The trainer's default where the kernels build; `RuntimeOptions(train_cpp_attention=False)` (or
ART_TRAIN_CPP_ATTENTION=0) uses `F.scaled_dot_product_attention`.

Why it exists: on CPU, SDPA's flash-attention kernel is the largest cost of a training step outside the
projections; its backward runs at ~15-25 GFLOP/s. One SmolLM2 layer over 16 x 255 tokens, forward + backward:
SDPA 82 ms, this 57 ms (benchmarks/README.md, "Training"). A whole training step, same process, steps
alternated by `bench_train_step.py --alternate ART_TRAIN_CPP_ATTENTION`: 1.13x and 1.08x faster, the same
peak RSS and page faults as SDPA.

Backward recomputes P from q and k (one more matmul and softmax) instead of keeping it: an earlier version kept
P (B x H x T^2 values per layer; SDPA keeps only O and a log-sum-exp): 48 ms per layer, but +0.5 GiB peak for
the demo's steps, page faults on every step for the extra memory, and whole steps 1.09x, 1.01x, 0.92x, 1.07x
in four A/B runs; so it was opt-in. Recomputing keeps only q, k and v, which SDPA keeps too.

What it computes, per kv head (the G query heads sharing it stacked as G*T rows, so grouped-query models need
no copies of k and v):

    S = q k^T (the input dtype: bf16 under the trainer's autocast, as Hugging Face's eager attention)
    P = causal_softmax(S * scale)   (float32 inside, rounded once; zeros above the diagonal)
    O = P v

and backward: P again from q and k, then dV = P^T dO, dP = dO v^T, dS = P * (dP - rowsum(P * dP)) * scale,
dQ = dS k, dK = dS^T q. It is used while a score matrix stays under `MAX_SCORES_BYTES` per layer (long
sequences use SDPA), and only where the C++ kernels build and pass their check (`cpp_kernels.usable`).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from art.kernels import cpp_kernels

MAX_SCORES_BYTES = 32 * 2**20
"""Largest score matrix (B x H x T^2 elements) of one layer call; four such temporaries live during its backward
(SmolLM2, 16 x 255 tokens in bf16: 18 MiB each; 4096 tokens in rows of 400: 28 MiB). Beyond it, SDPA."""


class _CausalAttention(torch.autograd.Function):
    """softmax(q k^T * scale, causal) v for q [B, H, T, D], k and v [B, K, T, D] contiguous, H = G * K."""

    @staticmethod
    def forward(
        ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, native_bf16: bool
    ) -> torch.Tensor:
        B, H, T, D = q.shape
        K = k.shape[1]
        q_BKRD = q.reshape(B, K, (H // K) * T, D)  # rows: query head g of kv head k, position t
        out = torch.matmul(_probs(q_BKRD, k, scale, native_bf16), v)
        ctx.save_for_backward(q_BKRD, k, v)  # P is recomputed in backward: nothing of T^2 is kept
        ctx.scale, ctx.native_bf16 = scale, native_bf16
        return out.view(B, H, T, D)

    @staticmethod
    def backward(
        ctx: Any, grad_out: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, None, None]:
        q_BKRD, k, v = ctx.saved_tensors
        B, H, T, D = grad_out.shape
        probs_BKRT = _probs(q_BKRD, k, ctx.scale, ctx.native_bf16)
        grad_BKRD = grad_out.to(probs_BKRT.dtype).reshape(q_BKRD.shape)
        grad_v = torch.matmul(probs_BKRT.transpose(-1, -2), grad_BKRD)
        grad_probs = torch.matmul(grad_BKRD, v.transpose(-1, -2))
        grad_scores = cpp_kernels.causal_softmax_backward(
            probs_BKRT, grad_probs, ctx.scale, native_bf16=ctx.native_bf16
        )
        del probs_BKRT, grad_probs
        grad_q = torch.matmul(grad_scores, k).view(B, H, T, D)
        grad_k = torch.matmul(grad_scores.transpose(-1, -2), q_BKRD)
        return grad_q, grad_k, grad_v, None, None


def _probs(q_BKRD: torch.Tensor, k: torch.Tensor, scale: float, native_bf16: bool) -> torch.Tensor:
    """P = causal_softmax(q k^T * scale), [B, K, G*T, T]."""
    return cpp_kernels.causal_softmax(
        torch.matmul(q_BKRD, k.transpose(-1, -2)), scale, native_bf16=native_bf16
    )


def kernels_apply(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, enabled: bool = True, native_bf16: bool = True
) -> bool:
    """Whether `attention` uses the C++ path for these inputs (else SDPA): `enabled`, CPU, one floating dtype
    the kernels take, contiguous [B, H, T, D] / [B, K, T, D] with H a multiple of K, P within
    `MAX_SCORES_BYTES`, and the kernels build and pass their check on this machine."""
    B, H, T, _ = q.shape
    K = k.shape[1]
    return (
        enabled
        and q.dtype == k.dtype == v.dtype
        and q.is_contiguous()
        and k.is_contiguous()
        and v.is_contiguous()
        and H % K == 0
        and B * H * T * T * q.element_size() <= MAX_SCORES_BYTES
        and cpp_kernels.usable(q.dtype, q.device, native_bf16=native_bf16)
    )


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    *,
    kernels: bool = True,
    native_bf16: bool = True,
) -> torch.Tensor:
    """Causal attention of q [B, H, T, D] over k, v [B, K, T, D] (K divides H; query head h reads kv head
    h // (H / K), as Hugging Face's `repeat_kv`): [B, H, T, D]. Right-padded rows are fine: real positions
    never attend to later ones. `kernels=False`: always SDPA."""
    if kernels_apply(q, k, v, enabled=kernels, native_bf16=native_bf16):
        out: torch.Tensor = _CausalAttention.apply(q, k, v, scale, native_bf16)  # type: ignore[no-untyped-call]
        return out
    return F.scaled_dot_product_attention(
        q, k, v, is_causal=True, scale=scale, enable_gqa=q.shape[1] != k.shape[1]
    )
