"""Attention of one new query token per row over the slot KV cache (the decode step's attention).

Why not `F.scaled_dot_product_attention`: on CPU it sends a single query row to its flash-attention kernel,
which tiles for long query blocks and spends most of its time on bookkeeping: 2.2 ms per layer for 32 rows
x 100 cached positions of SmolLM2 (9 query heads, 3 kv heads), 38% of a whole decode step
(benchmarks/README.md, "Rollout profiling"). Two replacements, same arithmetic:

- `attention_eager`: query heads that share a kv head are grouped (HF's `repeat_kv` order: query head h
  reads kv head h // G), so scores and output are two batched matmuls over [rows x kv heads] with G query
  rows each, without expanding keys or values. 4x faster than SDPA at 100 positions, but it upcasts the
  strided cache view to float32 first and grows worse than linearly with the length (1.6 ms at 200).
- the same written as broadcasts and sums, compiled by inductor (`torch.compile`, dynamic shapes) into
  two fused loops that read each cached key and value once, in place: 0.29 / 0.49 / 0.93 ms at
  100 / 200 / 400 positions for 32 rows (eager: 0.37 / 1.6 / 4.7 ms).

`DecodeAttention` picks the compiled kernel when `torch.compile` works on this machine (it needs a C++
compiler) and checks it once against the eager one; set ART_ENGINE_COMPILE=0 to keep eager. Compiling
takes ~20 s once per machine (inductor caches on disk; ~5 s after) and happens on the first decode step.

Numerics: scores, softmax and the weighted sum run in float32 (keys and values are upcast from the cache
dtype), as SDPA's CPU kernels accumulate; the result is cast back to the query dtype. Positions beyond a
row's length get -inf from the additive mask.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

import torch

log = logging.getLogger(__name__)

AttentionFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor]


def attention_eager(
    q_BH1D: torch.Tensor,
    keys_BKTD: torch.Tensor,
    values_BKTD: torch.Tensor,
    mask_B11T: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """softmax(q k^T * scale + mask) v for one query per row: [B, H, 1, D] in q's dtype.

    keys/values: [B, K, T, D] (K kv heads, H a multiple of K); mask: additive float32 [B, 1, 1, T].
    """
    B, H, _, D = q_BH1D.shape
    K = keys_BKTD.shape[1]
    q_BKGD = q_BH1D.reshape(B, K, H // K, D).float()
    scores_BKGT = torch.matmul(q_BKGD, keys_BKTD.float().transpose(-1, -2))
    scores_BKGT.mul_(scale).add_(mask_B11T)
    probs_BKGT = torch.softmax(scores_BKGT, dim=-1)
    out_BKGD = torch.matmul(probs_BKGT, values_BKTD.float())
    return out_BKGD.view(B, H, 1, D).to(q_BH1D.dtype)


def _attention_fusable(
    q_BH1D: torch.Tensor,
    keys_BKTD: torch.Tensor,
    values_BKTD: torch.Tensor,
    mask_B11T: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """`attention_eager` as broadcasts and reductions, which inductor fuses (slow if run eagerly)."""
    B, H, _, D = q_BH1D.shape
    K = keys_BKTD.shape[1]
    q_BKG1D = q_BH1D.reshape(B, K, H // K, 1, D).float()
    scores_BKGT = (q_BKG1D * keys_BKTD[:, :, None].float()).sum(-1) * scale + mask_B11T
    probs_BKGT = torch.softmax(scores_BKGT, dim=-1)
    out_BKGD = (probs_BKGT[..., None] * values_BKTD[:, :, None].float()).sum(-2)
    return out_BKGD.reshape(B, H, 1, D).to(q_BH1D.dtype)


_compiled: AttentionFn | None = None
_compile_lock = threading.Lock()


def _compiled_kernel() -> AttentionFn:
    """One compiled function per process: dynamo reuses its code for every engine and model shape."""
    global _compiled
    with _compile_lock:
        if _compiled is None:
            _compiled = torch.compile(_attention_fusable, dynamic=True)
        return _compiled


def compile_wanted(device: torch.device) -> bool:
    """Compile the decode attention? ART_ENGINE_COMPILE=0/1 decides; by default on CPU only (on GPUs
    SDPA-class kernels are fast already and inductor would need Triton)."""
    setting = os.environ.get("ART_ENGINE_COMPILE", "").strip()
    if setting in ("0", "1"):
        return setting == "1"
    return device.type == "cpu"


class DecodeAttention:
    """The decode attention in use: compiled (checked once against eager) where it works, else eager."""

    def __init__(self, *, compile: bool) -> None:
        self._want_compile = compile
        self._fn: AttentionFn = attention_eager
        self._prepared = not compile
        self.compiled = False

    def __call__(
        self,
        q_BH1D: torch.Tensor,
        keys_BKTD: torch.Tensor,
        values_BKTD: torch.Tensor,
        mask_B11T: torch.Tensor,
        scale: float,
    ) -> torch.Tensor:
        """Attention for one query per row (see `attention_eager` for shapes)."""
        if not self._prepared:
            self._prepare(q_BH1D, keys_BKTD, scale)
        return self._fn(q_BH1D, keys_BKTD, values_BKTD, mask_B11T, scale)

    def _prepare(self, q_BH1D: torch.Tensor, keys_BKTD: torch.Tensor, scale: float) -> None:
        """Compile for this model's head layout (batches of 1 and of several rows, which dynamo treats as
        different shapes) and compare with eager; any failure means eager from now on."""
        self._prepared = True
        H, D = q_BH1D.shape[1], q_BH1D.shape[3]
        K, dtype, device = keys_BKTD.shape[1], q_BH1D.dtype, q_BH1D.device
        start = time.perf_counter()
        log.info("compiling the decode attention kernel (once per process; ~20 s the first time)")
        try:
            kernel = _compiled_kernel()
            generator = torch.Generator(device=device).manual_seed(0)
            for rows, length in ((3, 5), (1, 7)):
                q = torch.randn(rows, H, 1, D, generator=generator, device=device).to(dtype)
                k = torch.randn(rows, K, length, D, generator=generator, device=device).to(dtype)
                v = torch.randn(rows, K, length, D, generator=generator, device=device).to(dtype)
                mask = torch.zeros(rows, 1, 1, length, device=device)
                mask[0, ..., -2:] = float("-inf")
                expected = attention_eager(q, k, v, mask, scale).float()
                got = kernel(q, k, v, mask, scale).float()
                tolerance = 1e-4 if dtype == torch.float32 else 2e-2
                if not torch.allclose(got, expected, atol=tolerance, rtol=tolerance):
                    raise RuntimeError(
                        f"compiled attention differs from eager by {(got - expected).abs().max().item():.3g}"
                    )
        except Exception as exc:  # no C++ compiler, an inductor bug, a mismatch: eager is always right
            log.warning("torch.compile is unavailable for decode attention (%s); using eager", exc)
            return
        self._fn = kernel
        self.compiled = True
        log.info("decode attention compiled in %.1f s", time.perf_counter() - start)
