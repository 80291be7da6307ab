"""C++ kernels for the engine's hottest small operations, built on first use with torch's own toolchain.

Two operations dominate a CPU decode step once the matmuls are packed (benchmarks/README.md, "Rollout
profiling"), and neither has a good torch kernel for its shapes:

- `attention`: one query per row over the KV cache. Each (row, kv head) goes to one thread, which reads
  every key and value row of that head once, from the strided cache in place, for all the query heads
  sharing it, and skips positions beyond the row's length (inductor's kernel reads them once per query
  head and runs five loops; SDPA's flash kernel tiles for long query blocks). With AVX-512 it scores 16
  positions at a time and sums their lanes in one shuffle tree instead of 16 horizontal sums, and the
  usual head layouts (groups of 1-8 query heads, head size 64 or 128) run loops compiled for their shape,
  which keep queries and sums in registers: 2.4-2.8x faster than one horizontal sum per position with the
  shape known only at run time (SmolLM2, 32 rows x 37-256 positions; benchmarks/README.md).
- `lora_b_add`: the second half of a folded LoRA group (`folded_lora`): y + (x A^T) B^T from the
  extended product [y | x A^T], in one pass instead of three torch ops (copy, small matmul, add), with
  the same roundings as PEFT's `y + lora_B(h)`.
- the element-wise steps between the matmuls, each one pass with the roundings of the torch ops it
  replaces: `add_rms_norm` (residual add + RMSNorm), `swiglu`, `rope_qkv` (rope on q and k, k and v
  written into the cache). In a decode step each also takes its input as a folded group's [y | x A^T]
  and adds the B product as it reads it (`lora_bt`), with `lora_b_add`'s exact arithmetic.
- `sample_rows`: the next token of each row without a nucleus (greedy or top_p = 1) and its logprob, one
  pass per row with the weights, block sums and inverse CDF of `sampling.sample`'s torch path (so the same
  tokens), 3x faster than those torch ops.
- for training's LM head (`training/logprobs.py`): `head_softmax`, the softmax of each position's logits in
  place with the target's logprob and the entropy, in one pass per row instead of seven torch ops over
  float32 copies (3080 positions x 49k vocabulary: 1.25 s of a 12 s step before).
- for training's attention (`training/causal_attention.py`): `causal_softmax` and
  `causal_softmax_backward`, the softmax of causal attention's score rows and its gradient, each one pass
  per row over the positions the row may see.

How they are built: with `torch._inductor.codecache.CppPythonBindingsCodeCache`, the compiler setup
inductor itself uses (same flags, vector ISA detection, on-disk cache; a C++ compiler is needed, nothing
else), one library per kernel and element type. Vector arithmetic is ATen's portable
`at::vec::Vectorized<float>` (AVX-512, AVX2, NEON...) with float32 accumulation. They keep the GIL
(each runs 1-500 us): released, the server's event loop took it at each of ~150 calls per decode step
and the engine waited to get it back (32 streamed requests: 300-346 -> 337-370 tok/s kept; see
benchmarks/README.md, "Rollout profiling"). Callers check a kernel against the torch ops it replaces before using it (`check_*`), and
fall back to those if anything here fails.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

_CSRC = Path(__file__).with_name("csrc")


def _source(name: str) -> str:
    """The text of one C++ source in `csrc/` (kept byte for byte as written, so inductor's cache hits)."""
    return (_CSRC / name).read_text()


_PRELUDE = _source("prelude.h")

_ATTENTION = _source("attention.cpp")

_LORA_B_ADD = _source("lora_b_add.cpp")

_ADD_RMS_NORM = _source("add_rms_norm.cpp")

_SWIGLU = _source("swiglu.cpp")

_ROPE_QKV = _source("rope_qkv.cpp")

_CAUSAL_SOFTMAX = _source("causal_softmax.cpp")

_CAUSAL_SOFTMAX_BACKWARD = _source("causal_softmax_backward.cpp")

_HEAD_SOFTMAX = _source("head_softmax.cpp")

_SAMPLE = _source("sample.cpp")

_LORA_ARGS = ["const float*", "const int64_t*", "int64_t", "int64_t"]  # a LoraBT: blocks, segments, S, R

_SOURCES = {
    "attention": (
        _ATTENTION,
        [
            "const scalar_t*",
            "const scalar_t*",
            "const scalar_t*",
            "const int64_t*",
            "scalar_t*",
            *["int64_t"] * 13,
            "float",
        ],
    ),
    "add_rms_norm": (
        _ADD_RMS_NORM,
        [
            "const scalar_t*",
            "const scalar_t*",
            "const scalar_t*",
            "scalar_t*",
            "scalar_t*",
            "int64_t",
            "int64_t",
            "int64_t",
            "float",
            *_LORA_ARGS,
            "int64_t",
        ],
    ),
    "swiglu": (
        _SWIGLU,
        ["const scalar_t*", "scalar_t*", "int64_t", "int64_t", *_LORA_ARGS, "int64_t"],
    ),
    "rope_qkv": (
        _ROPE_QKV,
        [
            "const scalar_t*",
            "const scalar_t*",
            "const scalar_t*",
            "const int64_t*",
            "scalar_t*",
            "scalar_t*",
            "scalar_t*",
            *["int64_t"] * 7,
            *_LORA_ARGS,
            "int64_t",
        ],
    ),
    "lora_b_add": (
        _LORA_B_ADD,
        ["const scalar_t*", "const float*", "const int64_t*", "int64_t", "scalar_t*", *["int64_t"] * 3],
    ),
    "head_softmax": (
        _HEAD_SOFTMAX,
        ["scalar_t*", "const int64_t*", "float*", "float*", "int64_t", "int64_t"],
    ),
    "sample": (
        _SAMPLE,
        ["const float*", "const float*", "const double*", "float*", "int64_t*", "float*", "float*"]
        + ["int64_t"] * 2,
    ),
    "causal_softmax": (_CAUSAL_SOFTMAX, ["const scalar_t*", "scalar_t*", "int64_t", "int64_t", "float"]),
    "causal_softmax_backward": (
        _CAUSAL_SOFTMAX_BACKWARD,
        ["const scalar_t*", "const scalar_t*", "scalar_t*", "int64_t", "int64_t", "float"],
    ),
}
_C_TYPES = {torch.float32: "float", torch.bfloat16: "c10::BFloat16", torch.float16: "c10::Half"}
VECTOR_FLOATS = 16  # sizes must be multiples of this (the widest Vectorized<float>, AVX-512)
_built: dict[tuple[str, torch.dtype, int], Callable[..., None]] = {}
_lock = threading.Lock()


def _kernel(name: str, dtype: torch.dtype, native_bf16: bool) -> Callable[..., None]:
    """The compiled kernel `name` for `dtype` (built once per process and setting; inductor caches it on
    disk). `native_bf16`: the caller allows AVX-512 BF16's conversion instruction (`RuntimeOptions.native_bf16`),
    used where the CPU has it."""
    native = int(dtype == torch.bfloat16 and native_bf16 and _cpu_has_native_bf16())
    with _lock:
        kernel = _built.get((name, dtype, native))
        if kernel is None:
            from torch._inductor.codecache import CppPythonBindingsCodeCache

            c_type = _C_TYPES[dtype]
            source, argtypes = _SOURCES[name]
            code = f"#define NATIVE_BF16 {native}\n" + (_PRELUDE + source).replace("SCALAR_T", c_type)
            kernel = CppPythonBindingsCodeCache.load_pybinding(
                [a.replace("scalar_t", c_type) for a in argtypes], code
            )
            _built[(name, dtype, native)] = kernel
        return kernel


@functools.cache
def _cpu_has_native_bf16() -> bool:
    """Whether the kernels can convert to bf16 with AVX-512 BF16's instruction: the CPU has it, and inductor
    builds for AVX-512 (the kernels' Vec is then 16 floats)."""
    try:
        from torch._inductor import cpu_vec_isa

        isa = cpu_vec_isa.pick_vec_isa()
        return bool(torch.cpu._is_avx512_bf16_supported()) and isa is not None and isa.bit_width() == 512
    except Exception:  # an older torch without these: the portable conversion
        return False


def supported(dtype: torch.dtype, device: torch.device, *sizes: int) -> bool:
    """Whether the kernels handle `dtype` on `device` with these sizes (CPU; each a multiple of 16,
    which covers the usual head sizes 64, 80, 96, 128, 256 and projection widths)."""
    return device.type == "cpu" and dtype in _C_TYPES and all(s % VECTOR_FLOATS == 0 for s in sizes)


def attention(
    q_BH1D: torch.Tensor,
    keys_BKTD: torch.Tensor,
    values_BKTD: torch.Tensor,
    lengths_B: torch.Tensor,
    scale: float,
    *,
    native_bf16: bool = True,
) -> torch.Tensor:
    """softmax(q k^T * scale) v over each row's first lengths[b] positions: [B, H, 1, D] in q's dtype.

    keys/values may be strided views of the cache (last dimension contiguous); lengths: int64 [B].
    """
    B, H, _, D = q_BH1D.shape
    K, T = keys_BKTD.shape[1], keys_BKTD.shape[2]
    for name, t in (("q", q_BH1D), ("keys", keys_BKTD), ("values", values_BKTD)):
        if t.stride(-1) != 1 or t.dtype != q_BH1D.dtype:
            raise ValueError(f"{name}: last dimension must be contiguous and dtypes equal")
    lengths = lengths_B if lengths_B.dtype == torch.int64 else lengths_B.to(torch.int64)
    lengths = lengths.contiguous()
    out_BHD = torch.empty(B, H, D, dtype=q_BH1D.dtype, device=q_BH1D.device)
    ks, vs = keys_BKTD.stride(), values_BKTD.stride()
    args: list[Any] = [q_BH1D, keys_BKTD, values_BKTD, lengths, out_BHD, B, H, K, D]
    args += [q_BH1D.stride(0), q_BH1D.stride(1), ks[0], ks[1], ks[2], vs[0], vs[1], vs[2], T, float(scale)]
    _kernel("attention", q_BH1D.dtype, native_bf16)(*args)
    return out_BHD.view(B, H, 1, D)


@dataclass(frozen=True)
class LoraBT:
    """A folded group's B for the C++ kernels: B transposed, in float32, only the blocks that hold nonzeros.

    A folded group's B is block-diagonal (each projection's outputs use only its own adapter's ranks:
    `lora.block_concat`), so most of a dense [R, N] B^T is zeros: half of a gate/up group's, two thirds of a
    q/k/v group's. The ranks a column does not use add exact zeros to a float32 sum that starts at +0, so
    leaving them out changes no result, only the work. `segments` [S, 4] int64 splits the N columns into runs
    (multiples of 16) as (c0, c1, r0, r1): columns [c0, c1) use ranks [r0, r1); `blocks` holds each run's
    [r1 - r0, c1 - c0] piece of B^T, row-major, one after another. Build it with `float_lora_bt`."""

    blocks: torch.Tensor
    segments: torch.Tensor
    rank: int  # R: the x A^T values that follow each row's N outputs
    columns: int  # N

    def args(self) -> tuple[torch.Tensor, torch.Tensor, int, int]:
        """The kernels' four LoRA arguments (`_LORA_ARGS`)."""
        return self.blocks, self.segments, int(self.segments.shape[0]), self.rank


def float_lora_bt(b_OR: torch.Tensor) -> LoraBT:
    """B [N, R] in the compute dtype (N a multiple of 16) -> the `LoraBT` the kernels take: per run of
    16-column blocks that use the same ranks, those ranks of B^T as float32 (an exact conversion, so the
    kernels multiply without converting a vector per load)."""
    N, R = int(b_OR.shape[0]), int(b_OR.shape[1])
    if N % VECTOR_FLOATS:
        raise ValueError(f"float_lora_bt: B has {N} outputs, expected a multiple of {VECTOR_FLOATS}")
    used = (b_OR.detach().reshape(N // VECTOR_FLOATS, VECTOR_FLOATS, R) != 0).any(1).cpu()  # [blocks, R]
    ranks = torch.arange(R)
    first = torch.where(used, ranks, R).min(1).values.tolist() if R else [0] * (N // VECTOR_FLOATS)
    last = torch.where(used, ranks + 1, 0).max(1).values.tolist() if R else [0] * (N // VECTOR_FLOATS)
    runs: list[list[int]] = []  # [c0, c1, r0, r1]
    for block, (lo, hi) in enumerate(zip(first, last, strict=True)):
        lo, hi = (lo, hi) if lo < hi else (0, 0)
        c0 = block * VECTOR_FLOATS
        if runs and runs[-1][2:] == [lo, hi]:
            runs[-1][1] = c0 + VECTOR_FLOATS
        else:
            runs.append([c0, c0 + VECTOR_FLOATS, lo, hi])
    bt_RN = b_OR.detach().t().float()
    pieces = [bt_RN[r0:r1, c0:c1].reshape(-1) for c0, c1, r0, r1 in runs]
    blocks = torch.cat(pieces) if pieces else bt_RN.new_zeros(0)
    if blocks.numel() == 0:
        blocks = bt_RN.new_zeros(1)  # a valid pointer for the kernels; no run reads it
    segments = torch.tensor(runs, dtype=torch.int64, device=b_OR.device).reshape(-1, 4)
    return LoraBT(blocks.contiguous(), segments, R, N)


def lora_b_add(y_MX: torch.Tensor, bt: LoraBT, *, native_bf16: bool = True) -> torch.Tensor:
    """y[..., :N] + y[..., N:] @ B^T for y [..., N + R] contiguous and B^T from `float_lora_bt`: [..., N]."""
    if not isinstance(bt, LoraBT):
        raise ValueError("lora_b_add: bt must be a LoraBT (from float_lora_bt), not a tensor")
    R, N = bt.rank, bt.columns
    if not y_MX.is_contiguous() or y_MX.shape[-1] != N + R:
        raise ValueError(
            f"lora_b_add: y {tuple(y_MX.shape)} and a B^T of rank {R} over {N} columns do not fit "
            "(expected contiguous rows of N + R values)"
        )
    M = y_MX.numel() // (N + R)
    out = torch.empty((*y_MX.shape[:-1], N), dtype=y_MX.dtype, device=y_MX.device)
    _kernel("lora_b_add", y_MX.dtype, native_bf16)(y_MX, *bt.args()[:3], out, M, N, R)
    return out


_NO_LORA = LoraBT(
    torch.zeros(1), torch.zeros(0, 4, dtype=torch.int64), 0, 0
)  # the arguments when there is none


def _lora_args(
    y: torch.Tensor, n: int, lora_bt: LoraBT | None, name: str
) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """The LoRA arguments of a kernel whose input rows of `n` values may carry R extra values ([y | h])."""
    if lora_bt is None:
        if y.shape[-1] != n:
            raise ValueError(f"{name}: rows of {y.shape[-1]} values, expected {n}")
        return _NO_LORA.args()
    if not isinstance(lora_bt, LoraBT) or lora_bt.columns != n or y.shape[-1] != n + lora_bt.rank:
        got = (
            f"rank {lora_bt.rank} over {lora_bt.columns} columns"
            if isinstance(lora_bt, LoraBT)
            else "a tensor"
        )
        raise ValueError(
            f"{name}: rows of {y.shape[-1]} values with a LoRA B^T of {got} do not fit (expected a LoraBT from "
            f"float_lora_bt over {n} columns and rows of {n} + R values)"
        )
    return lora_bt.args()


def add_rms_norm(
    x: torch.Tensor,
    y: torch.Tensor | None,
    weight: torch.Tensor,
    eps: float,
    lora_bt: LoraBT | None = None,
    *,
    native_bf16: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(s, h): s = x + y (x itself when y is None) and h = HF's RMSNorm of s times `weight`, rounded the
    way HF's float32-then-cast RMSNorm is; x [..., E] and y contiguous, weight [E].

    lora_bt: y is an extended folded-LoRA product [..., E + R] (`folded_lora`) and this its B^T over E
    columns (`float_lora_bt`): y's first E values plus the B product are added, exactly as
    `lora_b_add(y, lora_bt)` then this kernel would, in one pass."""
    E = x.shape[-1]
    if not x.is_contiguous() or (y is not None and (not y.is_contiguous() or y.shape[:-1] != x.shape[:-1])):
        raise ValueError("add_rms_norm: x and y must be contiguous and of one shape")
    lora = _NO_LORA.args() if y is None else _lora_args(y, E, lora_bt, "add_rms_norm")
    s = torch.empty_like(x) if y is not None else x
    h = torch.empty_like(x)
    M = x.numel() // E
    _kernel("add_rms_norm", x.dtype, native_bf16)(
        x, y if y is not None else x, weight.contiguous(), s, h, M, E, int(y is not None), float(eps), *lora,
        E + lora[3],
    )  # fmt: skip
    return s, h


def swiglu(gate_up: torch.Tensor, lora_bt: LoraBT | None = None, *, native_bf16: bool = True) -> torch.Tensor:
    """silu(gate) * up for gate_up = [gate | up] [..., 2F] contiguous: [..., F], rounded as torch does.

    lora_bt: gate_up is an extended folded-LoRA product [..., 2F + R] and this its B^T over 2F columns
    (`float_lora_bt`), added first exactly as `lora_b_add` would."""
    if not gate_up.is_contiguous():
        raise ValueError("swiglu: gate_up must be contiguous")
    F2 = lora_bt.columns if isinstance(lora_bt, LoraBT) else gate_up.shape[-1]
    lora = _lora_args(gate_up, F2, lora_bt, "swiglu")
    out = torch.empty((*gate_up.shape[:-1], F2 // 2), dtype=gate_up.dtype, device=gate_up.device)
    M = gate_up.numel() // (F2 + lora[3])
    _kernel("swiglu", gate_up.dtype, native_bf16)(gate_up, out, M, F2 // 2, *lora, F2 + lora[3])
    return out


def rope_qkv(
    qkv_BO: torch.Tensor,
    cos_PD: torch.Tensor,
    signed_sin_PD: torch.Tensor,
    positions_B: torch.Tensor,
    keys_SKPD: torch.Tensor,
    values_SKPD: torch.Tensor,
    heads: int,
    lora_bt: LoraBT | None = None,
    *,
    native_bf16: bool = True,
) -> torch.Tensor:
    """Rotate one decode step's queries and keys (rows at their own positions), write keys and values into
    cache slots 0..B-1 at those positions, and return the queries [B, H, 1, D].

    qkv [B, (H + 2K) * D] contiguous; cos / signed sin tables [P, D]; cache [slots, K, positions, D].
    lora_bt: qkv is an extended folded-LoRA product [B, (H + 2K) * D + R] and this its B^T (`float_lora_bt`), added
    first exactly as `lora_b_add` would."""
    B = qkv_BO.shape[0]
    K, D = keys_SKPD.shape[1], keys_SKPD.shape[3]
    if keys_SKPD.stride() != values_SKPD.stride() or keys_SKPD.stride(-1) != 1 or not qkv_BO.is_contiguous():
        raise ValueError("rope_qkv: unexpected layouts")
    N = (heads + 2 * K) * D
    lora = _lora_args(qkv_BO, N, lora_bt, "rope_qkv")
    q = torch.empty(B, heads, D, dtype=qkv_BO.dtype, device=qkv_BO.device)
    st = keys_SKPD.stride()
    positions = positions_B.to(torch.int64).contiguous()
    _kernel("rope_qkv", qkv_BO.dtype, native_bf16)(
        qkv_BO, cos_PD.contiguous(), signed_sin_PD.contiguous(), positions, q, keys_SKPD, values_SKPD,
        B, heads, K, D, st[0], st[1], st[2], *lora, N + lora[3],
    )  # fmt: skip
    return q.view(B, heads, 1, D)


def causal_softmax(scores_NRT: torch.Tensor, scale: float, *, native_bf16: bool = True) -> torch.Tensor:
    """Causal attention probabilities: softmax(scores * scale) of each query row over key positions 0..i,
    zeros after, where row r of the last two dimensions [R, T] is query position i = r % T (R a multiple of
    T: several heads' rows stacked); contiguous; the result in its dtype, float32 inside."""
    T = scores_NRT.shape[-1]
    if not scores_NRT.is_contiguous() or scores_NRT.dim() < 2 or scores_NRT.shape[-2] % T:
        raise ValueError(
            f"causal_softmax: scores must be contiguous [..., k*T, T], got {tuple(scores_NRT.shape)}"
        )
    probs = torch.empty_like(scores_NRT)
    _kernel("causal_softmax", scores_NRT.dtype, native_bf16)(
        scores_NRT, probs, scores_NRT.numel() // T, T, float(scale)
    )
    return probs


def causal_softmax_backward(
    probs_NTT: torch.Tensor, grad_probs_NTT: torch.Tensor, scale: float, *, native_bf16: bool = True
) -> torch.Tensor:
    """The gradient of the scores through `causal_softmax` from its output and the gradient of that output
    (both [..., k*T, T] contiguous, one dtype): probs * (grad - rowsum(probs * grad)) * scale, causal."""
    T = probs_NTT.shape[-1]
    if (
        not probs_NTT.is_contiguous()
        or not grad_probs_NTT.is_contiguous()
        or probs_NTT.shape != grad_probs_NTT.shape
        or probs_NTT.dtype != grad_probs_NTT.dtype
    ):
        raise ValueError("causal_softmax_backward: probs and grad must be contiguous, of one shape and dtype")
    grad_scores = torch.empty_like(probs_NTT)
    _kernel("causal_softmax_backward", probs_NTT.dtype, native_bf16)(
        probs_NTT, grad_probs_NTT, grad_scores, probs_NTT.numel() // T, T, float(scale)
    )
    return grad_scores


def head_softmax(
    logits_NV: torch.Tensor, targets_N: torch.Tensor, *, native_bf16: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn LM-head logits [N, V] (contiguous) into their softmax in place (float32 inside, one rounding to
    their dtype) and return (logprob of `targets_N`, entropy), float32 [N] each: what `log_softmax` in float32,
    a gather and `-(p * logp).sum(-1)` give, in one pass over the logits instead of seven."""
    if not logits_NV.is_contiguous() or logits_NV.dim() != 2 or targets_N.shape != logits_NV.shape[:1]:
        raise ValueError(
            f"head_softmax: logits must be contiguous [N, V] and targets [N], got {tuple(logits_NV.shape)} "
            f"and {tuple(targets_N.shape)}"
        )
    N, V = logits_NV.shape
    targets = targets_N.to(torch.int64).contiguous()
    if N and (int(targets.min()) < 0 or int(targets.max()) >= V):
        raise ValueError(f"head_softmax: targets must lie in [0, {V})")
    logprob = torch.empty(N, dtype=torch.float32, device=logits_NV.device)
    entropy = torch.empty_like(logprob)
    _kernel("head_softmax", logits_NV.dtype, native_bf16)(logits_NV, targets, logprob, entropy, N, V)
    return logprob, entropy


def sample_rows(
    logits_BV: torch.Tensor, temperature_B: torch.Tensor, u_B: torch.Tensor, scratch_BV: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(token ids [B] int64, their raw logprobs [B], log-sum-exp [B]) for float32 logits [B, V] (contiguous):
    argmax where temperature <= 0, else inverse-CDF sampling of softmax(logits / temperature) at the float64
    uniforms `u_B`, as `sampling.sample` does without top_p; `scratch_BV` is float32 room of at least [B, V]."""
    B, V = logits_BV.shape
    if logits_BV.dtype != torch.float32 or not logits_BV.is_contiguous():
        raise ValueError(f"sample_rows: logits must be contiguous float32, got {logits_BV.dtype}")
    if scratch_BV.dtype != torch.float32 or not scratch_BV.is_contiguous() or scratch_BV.numel() < B * V:
        raise ValueError("sample_rows: scratch must be contiguous float32 with room for [B, V]")
    token = torch.empty(B, dtype=torch.int64, device=logits_BV.device)
    logprob = torch.empty(B, dtype=torch.float32, device=logits_BV.device)
    lse = torch.empty(B, dtype=torch.float32, device=logits_BV.device)
    _kernel("sample", torch.float32, False)(
        logits_BV,
        temperature_B.to(torch.float32).contiguous(),
        u_B.to(torch.float64).contiguous(),
        scratch_BV,
        token,
        logprob,
        lse,
        B,
        V,
    )
    return token, logprob, lse


_usable: dict[tuple[torch.dtype, str, bool], bool] = {}


def usable(dtype: torch.dtype, device: torch.device, *sizes: int, native_bf16: bool = True) -> bool:
    """Whether to use these kernels here: `supported` for these sizes, and, once per dtype, setting and
    process, every kernel builds and gives the numbers of the torch ops it replaces on random inputs
    (`_self_check`). Any failure means False from then on, with a warning naming it. `native_bf16`: as the
    kernels are then called (`RuntimeOptions.native_bf16`)."""
    if not supported(dtype, device, *sizes):
        return False
    key = (dtype, device.type, native_bf16)
    with _lock:
        known = _usable.get(key)
    if known is None:
        try:
            _self_check(dtype, device, native_bf16)
            known = True
        except Exception as exc:  # no C++ compiler, a toolchain problem, a mismatch
            log.warning("the C++ kernels are unavailable for %s here (%s); using torch ops", dtype, exc)
            known = False
        with _lock:
            _usable[key] = known
    return known


def _self_check(dtype: torch.dtype, device: torch.device, native_bf16: bool = True) -> None:
    """Raise unless every kernel matches the torch ops it replaces (the references below) on random data.
    `sample_rows` is checked by its user, the engine's sampler (`art.engines.torch.sampling`): its reference
    is the engine's torch sampler, which this room must not import."""
    import torch.nn.functional as F

    gen = torch.Generator(device=device).manual_seed(0)

    def rand(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen, device=device) * scale).to(dtype)

    tol = 1e-5 if dtype == torch.float32 else 2e-2

    def close(name: str, got: torch.Tensor, expected: torch.Tensor) -> None:
        if not torch.allclose(got.float(), expected.float(), atol=tol, rtol=tol):
            raise RuntimeError(
                f"{name} differs from torch by {(got.float() - expected.float()).abs().max().item():.3g}"
            )

    x, y, w = rand(3, 32), rand(3, 32), rand(32)
    s, h = add_rms_norm(x, y, w, 1e-5, native_bf16=native_bf16)
    ref = (x + y).float()
    ref_h = w * (ref * torch.rsqrt(ref.pow(2).mean(-1, keepdim=True) + 1e-5)).to(dtype)
    close("add_rms_norm (sum)", s, x + y)
    close("add_rms_norm", h, ref_h)
    gu = rand(3, 64, scale=3.0)
    close("swiglu", swiglu(gu, native_bf16=native_bf16), F.silu(gu[:, :32]) * gu[:, 32:])
    yb, b = rand(3, 48 + 8), rand(48, 8, scale=0.2)
    b[:16, 4:] = 0  # block-diagonal, as a folded group's B: runs of columns that use some of the ranks
    b[16:32, :4] = 0
    close(
        "lora_b_add",
        lora_b_add(yb, float_lora_bt(b), native_bf16=native_bf16),
        yb[:, :48] + F.linear(yb[:, 48:].contiguous(), b),
    )
    scores, grad_p = rand(2, 18, 18, scale=3.0), rand(2, 18, 18)
    causal = torch.ones(18, 18, dtype=torch.bool, device=device).triu(1)
    ref_p = torch.softmax((scores.float() * 0.5).masked_fill(causal, float("-inf")), -1)
    ref_grad = ref_p * (grad_p.float() - (ref_p * grad_p.float()).sum(-1, keepdim=True)) * 0.5  # softmax'
    probs = causal_softmax(scores, 0.5, native_bf16=native_bf16)
    close("causal_softmax", probs, ref_p)
    close(
        "causal_softmax_backward",
        causal_softmax_backward(probs, grad_p, 0.5, native_bf16=native_bf16),
        ref_grad,
    )
    logits, targets = rand(3, 40, scale=4.0), torch.tensor([0, 17, 39], device=device)
    ref_logp = torch.log_softmax(logits.float(), -1)
    got_logp, got_entropy = head_softmax(logits, targets, native_bf16=native_bf16)
    close("head_softmax (probs)", logits, ref_logp.exp())
    close("head_softmax (logprob)", got_logp, ref_logp.gather(-1, targets[:, None]).squeeze(-1))
    close("head_softmax (entropy)", got_entropy, -(ref_logp.exp() * ref_logp).sum(-1))
    H, K, D, P = 2, 1, 32, 9
    qkv, cos, ssin = rand(2, (H + 2 * K) * D), rand(P, D), rand(P, D)
    positions = torch.tensor([3, 7], device=device)
    keys, values = rand(3, K, P, D), rand(3, K, P, D)
    q = rope_qkv(qkv, cos, ssin, positions, keys, values, H, native_bf16=native_bf16)
    x4 = qkv.view(2, H + 2 * K, D)
    rot = x4 * cos[positions][:, None] + x4.roll(D // 2, dims=-1) * ssin[positions][:, None]
    close("rope_qkv (q)", q[:, :, 0], rot[:, :H])
    close("rope_qkv (k)", keys[torch.arange(2), :, positions], rot[:, H : H + K])
    close("rope_qkv (v)", values[torch.arange(2), :, positions], x4[:, H + K :])
