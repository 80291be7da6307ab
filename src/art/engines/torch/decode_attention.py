"""Attention of one new query token per row over the slot KV cache (the decode step's attention).

Why not `F.scaled_dot_product_attention`: on CPU it sends a single query row to its flash-attention kernel,
which tiles for long query blocks and spends most of its time on bookkeeping: 2.2 ms per layer for 32 rows
x 100 cached positions of SmolLM2 (9 query heads, 3 kv heads), 38% of a whole decode step
(benchmarks/README.md, "Rollout profiling"). Three replacements, the same arithmetic, fastest first:

- "cpp": a C++ kernel (`cpp_kernels.attention`) that reads each cached key and value once for all the
  query heads sharing it, in place, and skips positions beyond each row's length.
- "inductor": the computation written as broadcasts and sums, compiled by `torch.compile` into fused
  loops (it reads each key and value once per query head).
- "eager": query heads that share a kv head are grouped (HF's `repeat_kv` order: query head h reads kv
  head h // G), so scores and output are two batched matmuls over [rows x kv heads] with G query rows
  each. It upcasts the strided cache view to float32 first and grows worse than linearly with the length.

`DecodeAttention` builds the fastest one that works on this machine on its first call (the first two need
a C++ compiler; `RuntimeOptions(engine_compile="off")` keeps eager), checks it against eager on random inputs, and falls
back, with a warning, if building or checking fails. Building takes seconds to ~20 s once per machine
(torch caches the result on disk).

Numerics: scores, softmax and the weighted sum run in float32 (keys and values are upcast from the cache
dtype), as SDPA's CPU kernels accumulate; the result is cast back to the query dtype.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

import torch

from art.kernels import cpp_kernels

log = logging.getLogger(__name__)

MaskedFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor]


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


def length_mask(lengths_B: torch.Tensor, positions: int) -> torch.Tensor:
    """Additive float32 mask [B, 1, 1, positions]: 0 before each row's length, -inf from it on."""
    allowed_BT = torch.arange(positions, device=lengths_B.device)[None, :] < lengths_B[:, None]
    mask = torch.zeros(allowed_BT.shape, dtype=torch.float32, device=lengths_B.device)
    return mask.masked_fill_(~allowed_BT, float("-inf"))[:, None, None]


_inductor_kernel: MaskedFn | None = None
_inductor_lock = threading.Lock()


def _compiled_kernel() -> MaskedFn:
    """One inductor-compiled function per process: dynamo reuses its code for every engine and model."""
    global _inductor_kernel
    with _inductor_lock:
        if _inductor_kernel is None:
            _inductor_kernel = torch.compile(_attention_fusable, dynamic=True)
        return _inductor_kernel


def compile_wanted(device: torch.device, setting: str = "auto") -> bool:
    """Build a compiled decode attention? `setting` ("on"/"off", `RuntimeOptions.engine_compile`) decides;
    "auto": on CPU only (on GPUs SDPA-class kernels are fast already, and these kernels are CPU code)."""
    if setting in ("on", "off"):
        return setting == "on"
    return device.type == "cpu"


class DecodeAttention:
    """The decode attention in use (see the module docstring); `kernel` names it once it is chosen."""

    def __init__(self, *, compile: bool, native_bf16: bool = True) -> None:
        self._want_compile = compile
        self._native_bf16 = native_bf16  # as the C++ kernel runs (`RuntimeOptions.native_bf16`)
        self.kernel = "eager" if not compile else "not chosen yet"
        self._prepared = not compile
        self._masked: MaskedFn = attention_eager
        self._mask_key: tuple[int, int] | None = None
        self._mask: torch.Tensor | None = None

    def __call__(
        self,
        q_BH1D: torch.Tensor,
        keys_BKTD: torch.Tensor,
        values_BKTD: torch.Tensor,
        lengths_B: torch.Tensor,
        scale: float,
    ) -> torch.Tensor:
        """Attention of each row's query over its first lengths_B[b] cached positions: [B, H, 1, D].

        keys/values: [B, K, T, D] views of the cache (T >= every length); lengths: int64 [B].
        """
        if not self._prepared:
            self._prepare(q_BH1D, keys_BKTD, scale)
        if self.kernel == "cpp":
            return cpp_kernels.attention(
                q_BH1D, keys_BKTD, values_BKTD, lengths_B, scale, native_bf16=self._native_bf16
            )
        return self._masked(
            q_BH1D, keys_BKTD, values_BKTD, self._mask_for(lengths_B, keys_BKTD.shape[2]), scale
        )

    def _mask_for(self, lengths_B: torch.Tensor, positions: int) -> torch.Tensor:
        """The additive mask, built once per decode step (every layer passes the same lengths tensor)."""
        key = (id(lengths_B), positions)
        if self._mask is None or self._mask_key != key:
            self._mask, self._mask_key = length_mask(lengths_B, positions), key
        return self._mask

    def _prepare(self, q_BH1D: torch.Tensor, keys_BKTD: torch.Tensor, scale: float) -> None:
        """Build the fastest kernel that works here, for this model's head layout, and check it against
        eager on batches of one and of several rows (dynamo treats those as different shapes)."""
        self._prepared = True
        H, D = q_BH1D.shape[1], q_BH1D.shape[3]
        K, dtype, device = keys_BKTD.shape[1], q_BH1D.dtype, q_BH1D.device
        candidates: list[tuple[str, Callable[[], Callable[..., torch.Tensor]]]] = []
        if cpp_kernels.supported(dtype, device, D):
            cpp = functools.partial(cpp_kernels.attention, native_bf16=self._native_bf16)
            candidates.append(("cpp", lambda: _with_lengths(cpp)))
        candidates.append(("inductor", _compiled_kernel))
        for name, build in candidates:
            start = time.perf_counter()
            log.info("building the %s decode attention kernel (once per machine; up to ~20 s)", name)
            try:
                kernel = build()
                _check(kernel, H, K, D, dtype, device, scale)
            except Exception as exc:  # no C++ compiler, a toolchain or inductor problem, a mismatch
                log.warning("the %s decode attention is unavailable here (%s)", name, exc)
                continue
            log.info("%s decode attention ready in %.1f s", name, time.perf_counter() - start)
            self.kernel = name
            if name == "inductor":
                self._masked = kernel
            return
        log.warning("using the eager decode attention (slower); see the warnings above")
        self.kernel = "eager"


def _with_lengths(kernel: Callable[..., torch.Tensor]) -> MaskedFn:
    """Adapt a lengths-based kernel to the masked signature `_check` calls (the mask's finite prefix)."""

    def masked(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float
    ) -> torch.Tensor:
        lengths = torch.isfinite(mask[:, 0, 0]).sum(-1)
        return kernel(q, k, v, lengths, scale)

    return masked


def _check(
    kernel: Callable[..., torch.Tensor],
    H: int,
    K: int,
    D: int,
    dtype: torch.dtype,
    device: torch.device,
    scale: float,
) -> None:
    """Raise unless `kernel` (masked signature) equals `attention_eager` on strided random cache views."""
    generator = torch.Generator(device=device).manual_seed(0)
    for rows, length in ((3, 5), (1, 7), (4, 70)):
        q = (
            torch.randn(rows, 1, H + K, D, generator=generator, device=device)
            .to(dtype)[:, :, :H]
            .transpose(1, 2)
        )
        k = torch.randn(rows + 2, K, length + 9, D, generator=generator, device=device).to(dtype)
        v = torch.randn(rows + 2, K, length + 9, D, generator=generator, device=device).to(dtype)
        lengths = torch.full((rows,), length, device=device)
        lengths[0] = length - 2
        mask = length_mask(lengths, length)
        view_k, view_v = k[:rows, :, :length], v[:rows, :, :length]
        expected = attention_eager(q, view_k, view_v, mask, scale).float()
        got = kernel(q, view_k, view_v, mask, scale).float()
        tolerance = 1e-4 if dtype == torch.float32 else 2e-2
        if not torch.allclose(got, expected, atol=tolerance, rtol=tolerance):
            raise RuntimeError(f"differs from eager by {(got - expected).abs().max().item():.3g}")
