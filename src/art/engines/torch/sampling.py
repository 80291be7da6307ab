"""Sampling a batch of next tokens, each row with its own temperature, top_p and seed.

Reproducibility regardless of batch composition: every row draws ONE uniform number from a counter-based
generator, u = splitmix64(seed, token index) (vectorised int64 arithmetic, no generator state), and picks
its token by inverse-CDF sampling: the first token whose cumulative probability exceeds u. So a request's
tokens depend only on its own logits, seed and position, not on which other requests share the batch or
in which row it sits. Each row takes one of three paths chosen by its own parameters only:
greedy (temperature 0: argmax), full vocabulary (top_p = 1) or nucleus (top_p < 1: weights below the
nucleus threshold are zeroed first). The CDF always runs in vocabulary order, in two levels (256-token
blocks, then inside one block) so no [B, V] cumulative sum is ever built; CPU sorts and top-k over the
vocabulary are slow, so the nucleus threshold comes from a top-256 and a full sort only when needed.

Reported logprobs are always log_softmax of the RAW logits (before temperature and top_p), the quantity the
trainer compares its own logprobs against.

With `fast`, rows without a nucleus (greedy or top_p = 1, nearly every row in practice) take one C++ pass per
row (`cpp_kernels.sample_rows`: the same weights from ATen's vectorised exp, block sums in torch's order and
the same CDF, so the same tokens, as tested; the log-sum-exp is summed in another order, so logprobs agree
within a float32 ulp or two): 32 rows of a 49k vocabulary in ~0.8 ms instead of ~2.4 ms of torch ops. Nucleus rows still take the torch path, row by row
as ever, so which path a row takes depends on its own parameters only.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import torch

from art.kernels import cpp_kernels

log = logging.getLogger(__name__)

_MASK64 = (1 << 64) - 1


def _signed(c: int) -> int:
    return c - (1 << 64) if c >= 1 << 63 else c


_GOLDEN = _signed(0x9E3779B97F4A7C15)
_MIX1 = _signed(0xBF58476D1CE4E5B9)
_MIX2 = _signed(0x94D049BB133111EB)


def _shr(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 (torch's >> is arithmetic)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def splitmix64(x: torch.Tensor) -> torch.Tensor:
    """The splitmix64 finaliser on int64 tensors (two's complement wrap-around = arithmetic mod 2^64)."""
    z = x + _GOLDEN
    z = (z ^ _shr(z, 30)) * _MIX1
    z = (z ^ _shr(z, 27)) * _MIX2
    return z ^ _shr(z, 31)


def uniforms(seeds_B: torch.Tensor, counters_B: torch.Tensor) -> torch.Tensor:
    """One float64 uniform in (0, 1) per row, a pure function of (seed, counter)."""
    z = splitmix64(splitmix64(seeds_B) ^ counters_B)
    return (_shr(z, 11).double() + 0.5) * (2.0**-53)


@dataclass
class SampleResult:
    """Sampled ids [B], their raw logprobs [B], and top-k alternatives ([B,k] ids and logprobs) if asked."""

    token_ids_B: torch.Tensor
    logprobs_B: torch.Tensor
    top_ids_BK: torch.Tensor | None
    top_logprobs_BK: torch.Tensor | None


_BLOCK = 256  # vocabulary block of the two-level inverse CDF


def _first_exceeding(cdf_NK: torch.Tensor, target_N1: torch.Tensor) -> torch.Tensor:
    """Per row, the first index whose cumulative value exceeds the target, never past the last increase.

    Entries with zero weight repeat their predecessor's cumulative value, so they are never returned; a
    target that rounds up to the total falls back to the first entry reaching the total (the last with
    weight).
    """
    index_N1 = torch.searchsorted(cdf_NK, target_N1, right=True)
    last_N1 = torch.searchsorted(cdf_NK, cdf_NK[:, -1:].contiguous(), right=False)
    return torch.minimum(index_N1, last_N1).squeeze(-1)


def inverse_cdf(weights_NV: torch.Tensor, u_N: torch.Tensor) -> torch.Tensor:
    """Per row, the index i where cumsum(weights)[i] first exceeds u * sum(weights) (weights >= 0).

    Two levels, so no [N, V] cumulative sum is needed: sums of 256-token blocks pick the block, then a
    cumulative sum inside that block alone picks the token. Everything is per row (batch independent).
    """
    N, V = weights_NV.shape
    pad = (-V) % _BLOCK
    if pad:
        weights_NV = torch.nn.functional.pad(weights_NV, (0, pad))
    blocks_NCK = weights_NV.view(N, -1, _BLOCK)
    block_cdf_NC = blocks_NCK.sum(-1).cumsum(-1)
    target_N1 = (u_N[:, None] * block_cdf_NC[:, -1:].double()).to(block_cdf_NC.dtype)
    block_N = _first_exceeding(block_cdf_NC, target_N1)
    rows_N = torch.arange(N, device=weights_NV.device)
    before_N1 = torch.where(block_N > 0, block_cdf_NC[rows_N, (block_N - 1).clamp(min=0)], 0.0)[:, None]
    inner_cdf_NK = before_N1 + blocks_NCK[rows_N, block_N].cumsum(-1)
    inner_N = _first_exceeding(inner_cdf_NK, target_N1)
    return block_N * _BLOCK + inner_N


def nucleus_threshold(weights_NV: torch.Tensor, top_p_N: torch.Tensor, k: int = 256) -> torch.Tensor:
    """Per row, the smallest weight inside the top_p nucleus (tokens by descending weight until the
    mass before them reaches top_p). Found among the top k weights; rows whose nucleus is larger fall back
    to a full sort (slow on CPU, rare for trained models). Ties at the threshold all stay in."""
    total_N1 = weights_NV.sum(-1, keepdim=True)
    k = min(k, weights_NV.shape[-1])
    top_NK = weights_NV.topk(k, dim=-1).values
    if k < weights_NV.shape[-1]:
        beyond_N = (top_NK.sum(-1, keepdim=True) / total_N1).squeeze(-1) < top_p_N
        if bool(beyond_N.any()):
            rows = beyond_N.nonzero().squeeze(-1)
            top_NK = top_NK.clone()
            full_NV = weights_NV[rows].sort(dim=-1, descending=True).values
            tau = nucleus_threshold(full_NV, top_p_N[rows], k=full_NV.shape[-1])
            top_NK[rows] = tau[:, None]  # the threshold itself; the count below then picks it
    mass_before_NK = (top_NK.cumsum(-1) - top_NK) / total_N1
    count_N1 = (mass_before_NK < top_p_N[:, None]).sum(-1, keepdim=True).clamp(min=1)
    return top_NK.gather(-1, count_N1 - 1).squeeze(-1)


class Workspace:
    """Two reusable [rows, vocab] float32 buffers for `sample`, so a decode step allocates no big temporaries.

    Fresh multi-MiB tensors every step are not free on CPU: the allocator hands them back to the OS and the
    kernel zero-fills their pages again on first touch (measured: sampling 32 rows of a 49k vocabulary took
    2-2.6x longer that way). Buffers grow to the largest batch seen and are reused after.
    """

    def __init__(self) -> None:
        self._buffers: list[torch.Tensor] = []

    def get(self, rows: int, vocab: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """Two [rows, vocab] float32 views (contents undefined)."""
        if not self._buffers or self._buffers[0].shape[0] < rows or self._buffers[0].shape[1] != vocab:
            size = max(rows, self._buffers[0].shape[0] if self._buffers else 0)
            self._buffers = [torch.empty(size, vocab, dtype=torch.float32, device=device) for _ in range(2)]
        return self._buffers[0][:rows], self._buffers[1][:rows]


def sample(
    logits_BV: torch.Tensor,
    temperature_B: torch.Tensor,
    top_p_B: torch.Tensor,
    seeds_B: torch.Tensor,
    counters_B: torch.Tensor,
    top_k: int = 0,
    workspace: Workspace | None = None,
    *,
    fast: bool = False,
) -> SampleResult:
    """Sample one token per row (float32 logits; per-row parameters; see the module docstring).

    fast: rows without a nucleus go through the C++ kernel (`cpp_kernels.sample_rows`); the caller has
    checked `cpp_kernels.usable(torch.float32, ...)` and the logits are contiguous."""
    B, V = logits_BV.shape
    workspace = workspace or Workspace()
    if fast and B:
        return _sample_fast(logits_BV, temperature_B, top_p_B, seeds_B, counters_B, top_k, workspace)
    shifted_BV, weights_BV = workspace.get(B, V, logits_BV.device)
    max_B1 = logits_BV.amax(-1, keepdim=True)
    torch.sub(logits_BV, max_B1, out=shifted_BV)
    # exp(logit - max): the sampling weights at temperature 1, and the softmax normaliser
    torch.exp(shifted_BV, out=weights_BV)
    lse_B1 = max_B1 + weights_BV.sum(-1, keepdim=True).log()

    greedy_B = temperature_B <= 0
    all_greedy = bool(greedy_B.all())
    token_ids_B = logits_BV.argmax(-1) if all_greedy else torch.empty_like(max_B1[:, 0], dtype=torch.int64)
    if not all_greedy:
        if not bool((temperature_B == 1).all()):
            # exp((logit - max) / T); x / 1.0 is exact, so rows at T = 1 keep the weights above bit for bit
            temperature_B1 = torch.where(greedy_B, 1.0, temperature_B)[:, None]
            torch.div(shifted_BV, temperature_B1, out=weights_BV).exp_()
        nucleus_B = ~greedy_B & (top_p_B < 1.0)
        if bool(nucleus_B.any()):
            rows = nucleus_B.nonzero().squeeze(-1)
            tau_N1 = nucleus_threshold(weights_BV[rows], top_p_B[rows])[:, None]
            weights_BV[rows] = weights_BV[rows].masked_fill(weights_BV[rows] < tau_N1, 0.0)
        token_ids_B = inverse_cdf(weights_BV, uniforms(seeds_B, counters_B))
        if bool(greedy_B.any()):
            token_ids_B = torch.where(greedy_B, logits_BV.argmax(-1), token_ids_B)

    sampled_logprobs_B = (logits_BV.gather(-1, token_ids_B[:, None]) - lse_B1).squeeze(-1)
    top_ids_BK = top_logprobs_BK = None
    if top_k > 0:
        top_logits_BK, top_ids_BK = logits_BV.topk(top_k, dim=-1)
        top_logprobs_BK = top_logits_BK - lse_B1
    return SampleResult(token_ids_B, sampled_logprobs_B, top_ids_BK, top_logprobs_BK)


def _sample_fast(
    logits_BV: torch.Tensor,
    temperature_B: torch.Tensor,
    top_p_B: torch.Tensor,
    seeds_B: torch.Tensor,
    counters_B: torch.Tensor,
    top_k: int,
    workspace: Workspace,
) -> SampleResult:
    """`sample` with the C++ kernel for every row, then the torch path for the nucleus rows only."""
    B, V = logits_BV.shape
    scratch_BV, _ = workspace.get(B, V, logits_BV.device)
    logits_BV = logits_BV.contiguous()  # (a no-op for the engine's logits)
    token_ids_B, logprobs_B, lse_B = cpp_kernels.sample_rows(
        logits_BV, temperature_B, uniforms(seeds_B, counters_B), scratch_BV
    )
    nucleus_B = (temperature_B > 0) & (top_p_B < 1.0)
    if bool(nucleus_B.any()):
        rows = nucleus_B.nonzero().squeeze(-1)
        picked = sample(
            logits_BV[rows], temperature_B[rows], top_p_B[rows], seeds_B[rows], counters_B[rows], 0, workspace
        ).token_ids_B
        token_ids_B[rows] = picked
        logprobs_B[rows] = logits_BV[rows, picked] - lse_B[rows]
    top_ids_BK = top_logprobs_BK = None
    if top_k > 0:
        top_logits_BK, top_ids_BK = logits_BV.topk(top_k, dim=-1)
        top_logprobs_BK = top_logits_BK - lse_B[:, None]
    return SampleResult(token_ids_B, logprobs_B, top_ids_BK, top_logprobs_BK)


# ---- per-row logit processing before sampling (rows that ask for it; the rest skip all of this) ----
#
# The order is vLLM's: logit_bias, penalties, the grammar's mask, then top_k and min_p; `sample` then applies
# temperature and top_p to what is left. These change which token is drawn, never the logprob reported for
# it: the scheduler reports log_softmax of the raw logits (the unconstrained policy the trainer scores).

_BIT_SHIFTS = torch.arange(32, dtype=torch.int32)


def apply_bitmask_(logits_SV: torch.Tensor, bitmask_SW: torch.Tensor) -> None:
    """Set to -inf every logit whose bit is 0 in an int32 bitmask [S, ceil(V/32)] (bit j of word w: token
    32 w + j; llguidance's and xgrammar's layout)."""
    S, V = logits_SV.shape
    shifts = _BIT_SHIFTS.to(bitmask_SW.device)
    allowed_SV = ((bitmask_SW[:, :, None] >> shifts) & 1).view(S, -1)[:, :V]
    logits_SV.masked_fill_(allowed_SV == 0, float("-inf"))


def apply_penalties_(
    logits_SV: torch.Tensor,
    counts_SV: torch.Tensor,
    seen_SV: torch.Tensor | None,
    repetition_S: torch.Tensor,
    presence_S: torch.Tensor,
    frequency_S: torch.Tensor,
) -> None:
    """vLLM's penalties. counts: how often each token was generated so far; seen: tokens of the prompt or
    the output (None when no row has a repetition penalty).

    repetition (HF/vLLM, > 1 discourages): a seen token's logit is divided by it when positive, multiplied
    when negative; presence and frequency (OpenAI's): logit -= presence * [count > 0] + frequency * count.
    """
    if seen_SV is not None:
        penalty_S1 = repetition_S[:, None]
        scaled_SV = torch.where(logits_SV > 0, logits_SV / penalty_S1, logits_SV * penalty_S1)
        logits_SV.copy_(torch.where(seen_SV, scaled_SV, logits_SV))
    counts_SV = counts_SV.to(logits_SV.dtype)
    logits_SV.sub_(
        frequency_S[:, None] * counts_SV + presence_S[:, None] * (counts_SV > 0).to(logits_SV.dtype)
    )


def apply_top_k_min_p_(
    logits_SV: torch.Tensor, top_k_S: torch.Tensor, min_p_S: torch.Tensor, temperature_S: torch.Tensor
) -> None:
    """Keep each row's `top_k` largest logits (0: all; ties at the k-th all stay) and, with `min_p`, the
    tokens whose probability at the row's temperature is at least min_p x the most likely one's:
    p_i >= min_p p_max  <=>  logit_i >= logit_max + temperature * log(min_p). Greedy rows keep their argmax
    either way."""
    V = logits_SV.shape[1]
    k_S = top_k_S.clamp(max=V)
    k_max = int(k_S.max())
    if 0 < k_max < V:
        top_SK = logits_SV.topk(k_max, dim=-1).values
        kth_S1 = top_SK.gather(-1, (k_S.clamp(min=1) - 1)[:, None])
        kth_S1 = torch.where(k_S[:, None] > 0, kth_S1, float("-inf"))
        logits_SV.masked_fill_(logits_SV < kth_S1, float("-inf"))
    if bool((min_p_S > 0).any()):
        max_S1 = logits_SV.amax(-1, keepdim=True)
        log_min_p_S1 = torch.where(min_p_S > 0, min_p_S, 1.0).log()[:, None]
        floor_S1 = max_S1 + temperature_S.clamp(min=0)[:, None] * log_min_p_S1
        floor_S1 = torch.where(min_p_S[:, None] > 0, floor_S1, float("-inf"))
        logits_SV.masked_fill_(logits_SV < floor_S1, float("-inf"))


def raw_logprobs(
    raw_SV: torch.Tensor, token_ids_S: torch.Tensor, top_k: int
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """(logprob of each sampled token, top-k ids, top-k logprobs) under log_softmax of the raw logits."""
    lse_S1 = raw_SV.logsumexp(-1, keepdim=True)
    sampled_S = (raw_SV.gather(-1, token_ids_S[:, None]) - lse_S1).squeeze(-1)
    if top_k <= 0:
        return sampled_S, None, None
    top_logits_SK, top_ids_SK = raw_SV.topk(top_k, dim=-1)
    return sampled_S, top_ids_SK, top_logits_SK - lse_S1


def fast_sampling_usable(device: torch.device) -> bool:
    """Whether `sample(..., fast=True)` may run here: the float32 C++ kernels are `usable` and, once per
    device type and process, `cpp_kernels.sample_rows` picks the very tokens `sample`'s torch path picks
    on random logits (logprobs within float32 rounding). A failure warns and means False."""
    if not cpp_kernels.usable(torch.float32, device, cpp_kernels.VECTOR_FLOATS):
        return False
    return _sample_rows_matches(device.type)


@functools.cache
def _sample_rows_matches(device_type: str) -> bool:
    device = torch.device(device_type)
    gen = torch.Generator(device=device).manual_seed(0)
    logits_BV = (torch.randn(4, 512, generator=gen, device=device) * 3.0).contiguous()
    temperature_B = torch.tensor([1.0, 0.7, 0.0, 1.3], device=device)
    seeds_B, counters_B = torch.arange(4, device=device), torch.arange(4, device=device) * 5
    reference = sample(logits_BV, temperature_B, torch.ones(4, device=device), seeds_B, counters_B)
    tokens_B, logprobs_B, _ = cpp_kernels.sample_rows(
        logits_BV, temperature_B, uniforms(seeds_B, counters_B), torch.empty_like(logits_BV)
    )
    if not torch.equal(tokens_B, reference.token_ids_B):
        log.warning(
            "the C++ sampler picked %s, torch %s; sampling with torch ops",
            tokens_B.tolist(),
            reference.token_ids_B.tolist(),
        )
        return False
    if not torch.allclose(logprobs_B, reference.logprobs_B, atol=1e-5, rtol=1e-5):
        log.warning("the C++ sampler's logprobs differ from torch's; sampling with torch ops")
        return False
    return True
