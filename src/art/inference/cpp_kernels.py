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

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

log = logging.getLogger(__name__)

_PRELUDE = r"""
#if NATIVE_BF16 && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512bf16")  // only defined where the CPU has it (`_native_bf16`)
#else
#undef NATIVE_BF16
#define NATIVE_BF16 0
#endif
#include <torch/csrc/inductor/cpp_prefix.h>
#include <vector>

using scalar_t = SCALAR_T;
using Vec = at::vec::Vectorized<float>;
constexpr int64_t W = Vec::size();

// Vec::size() elements as floats (inductor's flags turn the compiler's own vectorisation off, so every
// loop that matters is written with Vec).
static inline Vec load_row(const float* p) { return Vec::loadu(p); }
template <typename T>
static inline Vec load_row(const T* p) {
  Vec out;
  at::vec::load_to_float<T>(p, out);
  return out;
}

#if NATIVE_BF16
// Floats to bf16 bits with the CPU's own instruction (one, where ATen's portable rounding takes ten): the
// same round to nearest even, except that it flushes denormals to zero and writes NaNs differently, so
// vectors holding either take ATen's conversion: the bits are ATen's in every case.
static inline __m256i bf16_bits(const Vec& x) {
  const __m512 v = x;
  if (_mm512_fpclass_ps_mask(v, 0x20 | 0x01 | 0x80) == 0)  // no denormal, quiet or signalling NaN
    return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
  return at::vec::cvtfp32_bf16(v);
}
#endif

// Store floats as scalar_t (round to nearest even, ATen's vectorised conversion of one Vec; its array
// form `at::vec::convert(const float*, T*, n)` converts fewer than 32 elements one by one, 10x slower).
static inline void store_row(scalar_t* p, const Vec& x) {
  if constexpr (std::is_same_v<scalar_t, float>) {
    x.store(p);
  } else {
#if NATIVE_BF16
    if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bf16_bits(x));
      return;
    }
#endif
    at::vec::convert<scalar_t>(x).store(p, W);
  }
}

// Round floats to scalar_t and back: what storing a torch op's result in scalar_t does to it.
static inline Vec round_trip(const Vec& x) {
  if constexpr (std::is_same_v<scalar_t, float>) {
    return x;
  } else {
#if NATIVE_BF16
    if constexpr (std::is_same_v<scalar_t, c10::BFloat16>)
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bf16_bits(x)), 16));
#endif
    return at::vec::convert<float>(at::vec::convert<scalar_t>(x));
  }
}

// The B half of a folded LoRA group (`lora_b_add`, and the kernels that consume a group's output): for up to
// 4 rows of an extended product y = [y | h] (rows ys apart, h = y[N..N+R)), out = y + round(h @ bt) with the
// product summed in float32 over r in order and rounded to scalar_t, then added to y and rounded again: the
// two roundings of PEFT's `y + lora_B(h)`. bt: B transposed, float32 (its scalar_t values, exactly), held
// as blocks (`LoraB`, `cpp_kernels.LoraBT`): a folded group's B is block-diagonal, and the ranks a column
// does not use are exact zeros, which add nothing to a float32 sum that starts at +0, so they are skipped.
struct LoraB {
  const float* bt;     // the blocks, one after another: block s is [r1 - r0, c1 - c0] row-major
  const int64_t* seg;  // S x (c0, c1, r0, r1): runs of columns [c0, c1) (a partition of [0, N)), ranks [r0, r1)
  int64_t S;
  int64_t R;  // h values per row
};

// Tiles of ROWS rows x NV vectors keep the sums in registers, so each B^T vector loaded serves every row:
// columns n.. of y and out, nb.. of a block with rows bs floats apart; h rows hs apart; R ranks.
template <int ROWS, int NV>
static inline void lora_tile(const scalar_t* y, int64_t ys, const float* h, int64_t hs, const float* bt,
                             int64_t bs, scalar_t* out, int64_t os, int64_t n, int64_t nb, int64_t R) {
  Vec acc[ROWS][NV];
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < NV; ++j) acc[i][j] = Vec(0.0f);
  for (int64_t r = 0; r < R; ++r) {
    Vec b[NV];
    for (int j = 0; j < NV; ++j) b[j] = Vec::loadu(bt + r * bs + nb + j * W);
    for (int i = 0; i < ROWS; ++i) {
      const Vec hv(h[i * hs + r]);
      for (int j = 0; j < NV; ++j) acc[i][j] = at::vec::fmadd(hv, b[j], acc[i][j]);
    }
  }
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < NV; ++j) {
      const int64_t col = n + j * W;
      store_row(out + i * os + col, load_row(y + i * ys + col) + round_trip(acc[i][j]));
    }
}

// Columns [n0, n1) of one block (its first column c0, `bs` wide, R ranks).
template <int ROWS>
static inline void lora_cols(const scalar_t* y, int64_t ys, const float* h, int64_t hs, const float* bt,
                             int64_t bs, scalar_t* out, int64_t os, int64_t n0, int64_t n1, int64_t c0,
                             int64_t R) {
  int64_t n = n0;
  for (; n + 4 * W <= n1; n += 4 * W) lora_tile<ROWS, 4>(y, ys, h, hs, bt, bs, out, os, n, n - c0, R);
  for (; n < n1; n += W) lora_tile<ROWS, 1>(y, ys, h, hs, bt, bs, out, os, n, n - c0, R);
}

// Columns [n0, n1) of `rows` (<= 4) rows: h gathered (as floats, into h_room of 4 R), then each block's tiles.
static inline void lora_rows(const scalar_t* y, int64_t ys, int64_t rows, const LoraB& lb, scalar_t* out,
                             int64_t os, int64_t n0, int64_t n1, int64_t N, float* h_room) {
  const int64_t R = lb.R;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t r = 0; r < R; ++r) h_room[i * R + r] = static_cast<float>(y[i * ys + N + r]);
  const float* block = lb.bt;
  for (int64_t s = 0; s < lb.S; ++s) {
    const int64_t c0 = lb.seg[4 * s], c1 = lb.seg[4 * s + 1], r0 = lb.seg[4 * s + 2], r1 = lb.seg[4 * s + 3];
    const int64_t a = std::max(n0, c0), e = std::min(n1, c1), bs = c1 - c0, ranks = r1 - r0;
    const float* h = h_room + r0;
    if (a < e) {
      switch (rows) {
        case 4: lora_cols<4>(y, ys, h, R, block, bs, out, os, a, e, c0, ranks); break;
        case 3: lora_cols<3>(y, ys, h, R, block, bs, out, os, a, e, c0, ranks); break;
        case 2: lora_cols<2>(y, ys, h, R, block, bs, out, os, a, e, c0, ranks); break;
        default: lora_cols<1>(y, ys, h, R, block, bs, out, os, a, e, c0, ranks); break;
      }
    }
    block += ranks * bs;
  }
}

// The consumers' shared loop (add_rms_norm, swiglu, rope_qkv with a LoRA B): rows 0..M-1 of extended
// products y (rows ys apart: N outputs, then R values), 4 at a time over the threads; each block's y + B
// product goes into a per-thread buffer, then row_fn(row of N values, m) consumes each of its rows.
template <typename RowFn>
static inline void lora_row_blocks(const scalar_t* y, int64_t ys, int64_t M, int64_t N, const LoraB& lb,
                                   bool parallel, RowFn row_fn) {
#pragma omp parallel if (parallel)
  {
    std::vector<scalar_t> fixed(4 * N);
    std::vector<float> h_room(4 * lb.R);
#pragma omp for schedule(static)
    for (int64_t m0 = 0; m0 < M; m0 += 4) {
      const int64_t rows = std::min<int64_t>(4, M - m0);
      lora_rows(y + m0 * ys, ys, rows, lb, fixed.data(), N, 0, N, N, h_room.data());
      for (int64_t i = 0; i < rows; ++i) row_fn(fixed.data() + i * N, m0 + i);
    }
  }
}

static inline float hsum(const Vec& v) {
  return at::vec::vec_reduce_all<float>([](Vec& x, Vec& y) { return x + y; }, v);
}

// x[0..n) <- exp(x - max(x)), in place; returns their sum (a softmax's normaliser).
static inline float exp_shifted_inplace(float* x, int64_t n) {
  Vec mv(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + W <= n; i += W) mv = at::vec::maximum(mv, Vec::loadu(x + i));
  float m = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return at::vec::maximum(a, b); }, mv);
  for (; i < n; ++i) m = std::max(m, x[i]);
  Vec sv(0.0f);
  for (i = 0; i + W <= n; i += W) {
    const Vec e = (Vec::loadu(x + i) - Vec(m)).exp_u20();
    e.store(x + i);
    sv = sv + e;
  }
  float sum = hsum(sv);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  return sum;
}
"""

_ATTENTION = r"""
#if defined(CPU_CAPABILITY_AVX512)
// The lane sums of 16 vectors as one vector: r[j] = sum of s[j]'s 16 lanes (a 4-level shuffle-and-add tree,
// 45 instructions where 16 separate horizontal sums take ~150).
static inline Vec sum16(const Vec* s) {
  __m512 t[8], u[4], v[2];
  for (int p = 0; p < 8; ++p) {
    const __m512 a = s[2 * p], b = s[2 * p + 1];
    t[p] = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  }
  for (int p = 0; p < 4; ++p)
    u[p] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * p], t[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(t[2 * p], t[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  for (int p = 0; p < 2; ++p)
    v[p] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * p], u[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(u[2 * p], u[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(v[0], v[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(v[0], v[1], _MM_SHUFFLE(3, 1, 3, 1)));
}
#endif

// One (row, kv head): the G query heads sharing the kv head attend over cached positions 0..len-1, each key
// and value row read once for all of them. GT, NVT > 0: G and D / W fixed at compile time, so queries and
// sums stay in registers; 0: the runtime g, nv, with `scratch` (g * nv + g * W + nv vectors) as storage.
template <int GT, int NVT>
static void attend_group(const scalar_t* q, int64_t q_sh, const scalar_t* kb, int64_t k_st, const scalar_t* vb,
                         int64_t v_st, scalar_t* out, int64_t len, float scale, float* scores, int64_t max_len,
                         int64_t g, int64_t nv, Vec* scratch) {
  constexpr bool fixed = GT > 0 && NVT > 0;
  const int64_t G = fixed ? GT : g, NV = fixed ? NVT : nv;
  Vec qv_fixed[fixed ? GT * NVT : 1], part_fixed[fixed ? GT * W : 1], row_fixed[fixed ? NVT : 1];
  Vec* qv = fixed ? qv_fixed : scratch;                 // the scaled queries; later the outputs
  Vec* part = fixed ? part_fixed : scratch + G * NV;    // a block's per-position vector sums, W per head
  Vec* row = fixed ? row_fixed : scratch + G * NV + G * W;  // one key or value row
  for (int64_t h = 0; h < G; ++h)
    for (int64_t i = 0; i < NV; ++i) qv[h * NV + i] = load_row(q + h * q_sh + i * W) * Vec(scale);
  int64_t t = 0;
#if defined(CPU_CAPABILITY_AVX512)
  for (; t + W <= len; t += W) {  // W positions: a vector of products per (head, position), then one tree
    for (int64_t j = 0; j < W; ++j) {
      const scalar_t* kr = kb + (t + j) * k_st;
      for (int64_t i = 0; i < NV; ++i) row[i] = load_row(kr + i * W);
      for (int64_t h = 0; h < G; ++h) {
        Vec s = qv[h * NV] * row[0];
        for (int64_t i = 1; i < NV; ++i) s = at::vec::fmadd(qv[h * NV + i], row[i], s);
        part[h * W + j] = s;
      }
    }
    for (int64_t h = 0; h < G; ++h) sum16(part + h * W).store(scores + h * max_len + t);
  }
#endif
  for (; t < len; ++t) {
    const scalar_t* kr = kb + t * k_st;
    for (int64_t i = 0; i < NV; ++i) row[i] = load_row(kr + i * W);
    for (int64_t h = 0; h < G; ++h) {
      Vec s = qv[h * NV] * row[0];
      for (int64_t i = 1; i < NV; ++i) s = at::vec::fmadd(qv[h * NV + i], row[i], s);
      scores[h * max_len + t] = hsum(s);
    }
  }
  for (int64_t h = 0; h < G; ++h) {  // softmax over the positions, in place
    float* s = scores + h * max_len;
    const float inv = 1.0f / exp_shifted_inplace(s, len);
    int64_t i = 0;
    for (; i + W <= len; i += W) (Vec::loadu(s + i) * Vec(inv)).store(s + i);
    for (; i < len; ++i) s[i] *= inv;
  }
  for (int64_t i = 0; i < G * NV; ++i) qv[i] = Vec(0.0f);
  for (t = 0; t < len; ++t) {
    const scalar_t* vr = vb + t * v_st;
    for (int64_t i = 0; i < NV; ++i) row[i] = load_row(vr + i * W);
    for (int64_t h = 0; h < G; ++h) {
      const Vec p(scores[h * max_len + t]);
      for (int64_t i = 0; i < NV; ++i) qv[h * NV + i] = at::vec::fmadd(p, row[i], qv[h * NV + i]);
    }
  }
  for (int64_t h = 0; h < G; ++h)
    for (int64_t i = 0; i < NV; ++i) store_row(out + (h * NV + i) * W, qv[h * NV + i]);
}

using AttendFn = void (*)(const scalar_t*, int64_t, const scalar_t*, int64_t, const scalar_t*, int64_t, scalar_t*,
                          int64_t, float, float*, int64_t, int64_t, int64_t, Vec*);

template <int NVT>
static AttendFn attend_for_heads(int64_t G) {
  switch (G) {
    case 1: return attend_group<1, NVT>;
    case 2: return attend_group<2, NVT>;
    case 3: return attend_group<3, NVT>;
    case 4: return attend_group<4, NVT>;
    case 5: return attend_group<5, NVT>;
    case 6: return attend_group<6, NVT>;
    case 7: return attend_group<7, NVT>;
    case 8: return attend_group<8, NVT>;
    default: return attend_group<0, 0>;
  }
}

// q: [B, H, D] (strides q_sb, q_sh, 1); k, v: [B, K, T, D] (strides *_sb, *_sk, *_st, 1); D % W == 0;
// lengths: [B] (row b attends to positions 0..lengths[b]-1, at most max_len); out: [B, H, D] contiguous.
// One task per (row, kv head); head groups of 1-8 and D / W of 4 or 8 (head sizes 64 and 128 with AVX-512)
// run a compiled-for-the-shape loop, the rest the general one.
extern "C" void kernel(const scalar_t* q, const scalar_t* k, const scalar_t* v, const int64_t* lengths,
                       scalar_t* out, int64_t B, int64_t H, int64_t K, int64_t D, int64_t q_sb,
                       int64_t q_sh, int64_t k_sb, int64_t k_sk, int64_t k_st, int64_t v_sb, int64_t v_sk,
                       int64_t v_st, int64_t max_len, float scale) {
  const int64_t G = H / K, NV = D / W;
  const AttendFn attend = NV == 4 ? attend_for_heads<4>(G) : NV == 8 ? attend_for_heads<8>(G) : attend_group<0, 0>;
#pragma omp parallel
  {
    std::vector<float> scores(G * max_len + W);
    std::vector<Vec> scratch(G * NV + G * W + NV);
#pragma omp for schedule(static)
    for (int64_t task = 0; task < B * K; ++task) {
      const int64_t b = task / K, kh = task % K;
      attend(q + b * q_sb + kh * G * q_sh, q_sh, k + b * k_sb + kh * k_sk, k_st, v + b * v_sb + kh * v_sk, v_st,
             out + (b * H + kh * G) * D, std::min(lengths[b], max_len), scale, scores.data(), max_len, G, NV,
             scratch.data());
    }
  }
}
"""

_LORA_B_ADD = r"""
// out[m, :] = y[m, :N] + round(y[m, N:N+R] @ B^T) for m < M: y [M, N+R] contiguous, B^T in blocks (bt, seg,
// S: `LoraB`), out [M, N]; N % W == 0 (`lora_rows`). A task: 4 rows x up to 256 columns.
extern "C" void kernel(const scalar_t* y, const float* bt, const int64_t* seg, int64_t S, scalar_t* out,
                       int64_t M, int64_t N, int64_t R) {
  const LoraB lb{bt, seg, S, R};
  const int64_t stride = N + R, CHUNK = 16 * W;
  const int64_t row_blocks = (M + 3) / 4, chunks = (N + CHUNK - 1) / CHUNK;
#pragma omp parallel if (M * N * R > 262144)
  {
    std::vector<float> h(4 * R);
#pragma omp for schedule(static)
    for (int64_t task = 0; task < row_blocks * chunks; ++task) {
      const int64_t m0 = (task / chunks) * 4, n0 = (task % chunks) * CHUNK;
      lora_rows(y + m0 * stride, stride, std::min<int64_t>(4, M - m0), lb, out + m0 * N, N, n0,
                std::min(N, n0 + CHUNK), N, h.data());
    }
  }
}
"""

_ADD_RMS_NORM = r"""
// s = x + y (if y), h = w * round(s * rsqrt(mean(s^2) + eps)) per row, rounded like HF's RMSNorm after a
// residual add: x, s, h [M, E] contiguous, w [E]; E % W == 0. y may equal nullptr (no add; s unused).
// y rows are y_stride apart; with R > 0 each is an extended LoRA product [y | h] (E + R values) whose B
// product (B^T in blocks: bt, seg, S, as `lora_b_add` takes them) is added first, exactly as `lora_b_add` would (`lora_rows`, 4 rows at a time
// into a buffer the sum then reads).
static inline void norm_row(const scalar_t* src, const scalar_t* w, scalar_t* hm, int64_t E, float eps) {
  Vec acc(0.0f);
  for (int64_t e = 0; e < E; e += W) {
    const Vec v = load_row(src + e);
    acc = at::vec::fmadd(v, v, acc);
  }
  const float inv = 1.0f / std::sqrt(hsum(acc) / static_cast<float>(E) + eps);
  for (int64_t e = 0; e < E; e += W) store_row(hm + e, load_row(w + e) * round_trip(load_row(src + e) * Vec(inv)));
}

extern "C" void kernel(const scalar_t* x, const scalar_t* y, const scalar_t* w, scalar_t* s, scalar_t* h,
                       int64_t M, int64_t E, int64_t has_y, float eps, const float* bt, const int64_t* seg,
                       int64_t S, int64_t R, int64_t y_stride) {
  if (has_y && R > 0) {
    lora_row_blocks(y, y_stride, M, E, LoraB{bt, seg, S, R}, M * E > 8192, [&](const scalar_t* ym, int64_t m) {
      for (int64_t e = 0; e < E; e += W) store_row(s + m * E + e, load_row(x + m * E + e) + load_row(ym + e));
      norm_row(s + m * E, w, h + m * E, E, eps);
    });
    return;
  }
#pragma omp parallel for schedule(static) if (M * E > 8192)
  for (int64_t m = 0; m < M; ++m) {
    const scalar_t* src = x + m * E;
    if (has_y) {
      const scalar_t* ym = y + m * y_stride;
      scalar_t* sm = s + m * E;
      for (int64_t e = 0; e < E; e += W) store_row(sm + e, load_row(src + e) + load_row(ym + e));
      src = sm;
    }
    norm_row(src, w, h + m * E, E, eps);
  }
}
"""

_SWIGLU = r"""
// a = round(silu(g)) * u, rounded, for gu = [g | u] [M, 2F] (rows `stride` apart), a [M, F] contiguous;
// F % W == 0. With R > 0 each gu row is an extended LoRA product [g | u | h] whose B product (B^T in blocks:
// bt, seg, S) is added to g and u first, exactly as `lora_b_add` would (`lora_rows`, 4 rows at a time into a
// buffer the activation then reads).
static inline void swiglu_row(const scalar_t* g, scalar_t* am, int64_t F) {
  const scalar_t* u = g + F;
  for (int64_t f = 0; f < F; f += W) {
    const Vec gv = load_row(g + f);
    const Vec silu = gv / (Vec(1.0f) + gv.neg().exp());
    store_row(am + f, round_trip(silu) * load_row(u + f));
  }
}

extern "C" void kernel(const scalar_t* gu, scalar_t* a, int64_t M, int64_t F, const float* bt,
                       const int64_t* seg, int64_t S, int64_t R, int64_t stride) {
  if (R > 0) {
    lora_row_blocks(gu, stride, M, 2 * F, LoraB{bt, seg, S, R}, M * F > 16384,
                    [&](const scalar_t* row, int64_t m) { swiglu_row(row, a + m * F, F); });
    return;
  }
#pragma omp parallel for schedule(static) if (M * F > 16384)
  for (int64_t m = 0; m < M; ++m) swiglu_row(gu + m * stride, a + m * F, F);
}
"""

_ROPE_QKV = r"""
// One decode step's q/k/v for B rows from the fused projection qkv [B, (H + 2K) * D] (rows `stride` apart):
// q and k rotated (HF's rotate-half rope, as round(round(x * cos) + round(roll(x, D/2) * ssin)) with ssin the
// sin table with its first half negated) at each row's position; q written to q_out [B, H, D], k and v into
// the cache at [slot b, head, position b, :] (strides: slot, head, position; last dimension contiguous).
// cos, ssin: [P, D] contiguous; D % (2 W) == 0. With R > 0 each qkv row is an extended LoRA product
// [qkv | h] whose B product (B^T in blocks: bt, seg, S) is added first, exactly as `lora_b_add` would
// (`lora_rows`, 4 rows at a time into a buffer the rotation then reads).
static inline void rope_row(const scalar_t* row, const scalar_t* cos, const scalar_t* ssin, int64_t p, int64_t b,
                            scalar_t* q_out, scalar_t* keys, scalar_t* values, int64_t H, int64_t K, int64_t D,
                            int64_t c_ss, int64_t c_sh, int64_t c_sp) {
  const int64_t half = D / 2;
  const scalar_t* c = cos + p * D;
  const scalar_t* sn = ssin + p * D;
  for (int64_t head = 0; head < H + 2 * K; ++head) {
    const scalar_t* x = row + head * D;
    scalar_t* dst;
    if (head < H) {
      dst = q_out + (b * H + head) * D;
    } else if (head < H + K) {
      dst = keys + b * c_ss + (head - H) * c_sh + p * c_sp;
    } else {
      scalar_t* vd = values + b * c_ss + (head - H - K) * c_sh + p * c_sp;
      for (int64_t d = 0; d < D; d += W) store_row(vd + d, load_row(x + d));
      continue;
    }
    for (int64_t d = 0; d < D; d += W) {
      const int64_t r = d < half ? d + half : d - half;
      const Vec a = round_trip(load_row(x + d) * load_row(c + d));
      const Vec bb = round_trip(load_row(x + r) * load_row(sn + d));
      store_row(dst + d, a + bb);
    }
  }
}

extern "C" void kernel(const scalar_t* qkv, const scalar_t* cos, const scalar_t* ssin, const int64_t* pos,
                       scalar_t* q_out, scalar_t* keys, scalar_t* values, int64_t B, int64_t H, int64_t K,
                       int64_t D, int64_t c_ss, int64_t c_sh, int64_t c_sp, const float* bt, const int64_t* seg,
                       int64_t S, int64_t R, int64_t stride) {
  const int64_t N = (H + 2 * K) * D;
  if (R > 0) {
    lora_row_blocks(qkv, stride, B, N, LoraB{bt, seg, S, R}, B * N > 16384, [&](const scalar_t* row, int64_t b) {
      rope_row(row, cos, ssin, pos[b], b, q_out, keys, values, H, K, D, c_ss, c_sh, c_sp);
    });
    return;
  }
  for (int64_t b = 0; b < B; ++b)
    rope_row(qkv + b * stride, cos, ssin, pos[b], b, q_out, keys, values, H, K, D, c_ss, c_sh, c_sp);
}
"""

_CAUSAL_SOFTMAX = r"""
// P[r, :] = softmax(S[r, :i+1] * scale) then zeros, for i = r % T (causal attention's probabilities, query
// position i over key positions 0..i): S, P [R, T] contiguous (R = heads x T). Float32 arithmetic, one
// rounding to scalar_t at the end (as HF's eager attention: float32 softmax, cast for the product with v).
extern "C" void kernel(const scalar_t* S, scalar_t* P, int64_t R, int64_t T, float scale) {
#pragma omp parallel
  {
    std::vector<float> buf(T + W);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < R; ++r) {
      const int64_t n = r % T + 1;
      const scalar_t* s = S + r * T;
      scalar_t* p = P + r * T;
      float* x = buf.data();
      int64_t j = 0;
      for (; j + W <= n; j += W) (load_row(s + j) * Vec(scale)).store(x + j);
      for (; j < n; ++j) x[j] = static_cast<float>(s[j]) * scale;
      const float inv = 1.0f / exp_shifted_inplace(x, n);
      for (j = 0; j + W <= n; j += W) store_row(p + j, Vec::loadu(x + j) * Vec(inv));
      for (; j < n; ++j) p[j] = static_cast<scalar_t>(x[j] * inv);
      for (; j < T; ++j) p[j] = static_cast<scalar_t>(0.0f);
    }
  }
}
"""

_CAUSAL_SOFTMAX_BACKWARD = r"""
// dS[r, j] = P[r, j] * (dP[r, j] - sum_k P[r, k] dP[r, k]) * scale for j <= i = r % T, else 0: the gradient
// of S through `causal_softmax`, given its output P and the gradient dP of P. [R, T] contiguous each.
extern "C" void kernel(const scalar_t* P, const scalar_t* dP, scalar_t* dS, int64_t R, int64_t T, float scale) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < R; ++r) {
    const int64_t n = r % T + 1;
    const scalar_t* p = P + r * T;
    const scalar_t* dp = dP + r * T;
    scalar_t* ds = dS + r * T;
    Vec acc(0.0f);
    int64_t j = 0;
    for (; j + W <= n; j += W) acc = at::vec::fmadd(load_row(p + j), load_row(dp + j), acc);
    float delta = hsum(acc);
    for (; j < n; ++j) delta += static_cast<float>(p[j]) * static_cast<float>(dp[j]);
    for (j = 0; j + W <= n; j += W)
      store_row(ds + j, load_row(p + j) * (load_row(dp + j) - Vec(delta)) * Vec(scale));
    for (; j < n; ++j)
      ds[j] = static_cast<scalar_t>(static_cast<float>(p[j]) * (static_cast<float>(dp[j]) - delta) * scale);
    for (; j < T; ++j) ds[j] = static_cast<scalar_t>(0.0f);
  }
}
"""

_HEAD_SOFTMAX = r"""
// In place over LM-head logits L [N, V] (contiguous rows): L[n] <- softmax(L[n]), float32 inside and one
// rounding to scalar_t; logprob[n] = L[n, target[n]] - logsumexp(L[n]); entropy[n] = -sum_v p log p (float32).
// With e = exp(x - max): logsumexp = max + log(sum e), entropy = log(sum e) - sum(e (x - max)) / sum(e).
extern "C" void kernel(scalar_t* L, const int64_t* target, float* logprob, float* entropy, int64_t N, int64_t V) {
#pragma omp parallel
  {
    std::vector<float> buf(V + W);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      scalar_t* l = L + n * V;
      float* x = buf.data();
      Vec mv(-std::numeric_limits<float>::infinity());
      int64_t j = 0;
      for (; j + W <= V; j += W) {
        const Vec v = load_row(l + j);
        v.store(x + j);
        mv = at::vec::maximum(mv, v);
      }
      float m = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return at::vec::maximum(a, b); }, mv);
      for (; j < V; ++j) {
        x[j] = static_cast<float>(l[j]);
        m = std::max(m, x[j]);
      }
      Vec sv(0.0f), tv(0.0f);
      for (j = 0; j + W <= V; j += W) {
        const Vec d = Vec::loadu(x + j) - Vec(m);
        const Vec e = d.exp_u20();
        e.store(x + j);
        sv = sv + e;
        tv = at::vec::fmadd(e, d, tv);
      }
      float s = hsum(sv), t = hsum(tv);
      const float target_logit = static_cast<float>(l[target[n]]);
      for (; j < V; ++j) {
        const float d = x[j] - m;
        x[j] = std::exp(d);
        s += x[j];
        t += x[j] * d;
      }
      const float log_s = std::log(s), inv = 1.0f / s;
      logprob[n] = target_logit - m - log_s;
      entropy[n] = log_s - t * inv;
      for (j = 0; j + W <= V; j += W) store_row(l + j, Vec::loadu(x + j) * Vec(inv));
      for (; j < V; ++j) l[j] = static_cast<scalar_t>(x[j] * inv);
    }
  }
}
"""

_SAMPLE = r"""
// Next tokens of B rows of float32 logits [B, V] (contiguous), each row on its own (batch independent), as
// `sampling.sample` does for rows without a nucleus: temperature t[b] <= 0 picks the argmax (its first
// index); otherwise the token where the cumulative sum of w = exp((x - max) / t), in vocabulary order, first
// exceeds u[b] * sum(w) (the two-level inverse CDF: 256-token blocks, then inside one block; never a token
// of zero weight). logprob[b] = x[token] - lse[b], lse[b] = max + log(sum exp(x - max)): raw log-softmax.
// `scratch`: [B, V] floats of room for the weights.
extern "C" void kernel(const float* logits, const float* temperature, const double* u, float* scratch,
                       int64_t* token, float* logprob, float* lse, int64_t B, int64_t V) {
  constexpr int64_t BLOCK = 256;
  const int64_t NB = (V + BLOCK - 1) / BLOCK;
#pragma omp parallel
  {
    std::vector<float> cdf(NB);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      const float* x = logits + b * V;
      float* w = scratch + b * V;
      Vec mv(-std::numeric_limits<float>::infinity());
      int64_t i = 0;
      for (; i + W <= V; i += W) mv = at::vec::maximum(mv, Vec::loadu(x + i));
      float m = at::vec::vec_reduce_all<float>([](Vec& a, Vec& c) { return at::vec::maximum(a, c); }, mv);
      for (; i < V; ++i) m = std::max(m, x[i]);
      const float t = temperature[b];
      const bool plain = t == 1.0f;
      // Positions in vectors, the last one padded with -inf (weight 0): every weight comes from the same
      // vectorised exp as torch.exp's.
      const auto load = [&](int64_t at) {
        if (at + W <= V) return Vec::loadu(x + at);
        alignas(64) float tail[W];
        for (int64_t j = 0; j < W; ++j) tail[j] = at + j < V ? x[at + j] : -std::numeric_limits<float>::infinity();
        return Vec::loadu(tail);
      };
      const auto store = [&](int64_t at, const Vec& e) {
        if (at + W <= V) {
          e.store(w + at);
        } else {
          e.store(w + at, static_cast<int>(V - at));
        }
      };
      Vec sv(0.0f);
      for (i = 0; i < V; i += W) {
        const Vec e = (load(i) - Vec(m)).exp();
        sv = sv + e;
        if (plain) store(i, e);
      }
      const float s = hsum(sv);
      lse[b] = m + std::log(s);
      int64_t pick = 0;
      if (t <= 0.0f) {
        while (pick < V && !(x[pick] == m)) ++pick;
        if (pick == V) pick = 0;  // NaN logits: no index equals the max
      } else {
        if (!plain) {
          for (i = 0; i < V; i += W) store(i, ((load(i) - Vec(m)) / Vec(t)).exp());
        }
        double run = 0.0;  // torch's CPU cumsum of float32 accumulates in float64
        for (int64_t k = 0; k < NB; ++k) {
          // The block's sum in the order torch's CPU sum over a contiguous 256 floats takes (found by
          // experiment on torch 2.13, AVX-512 and AVX2 builds alike: 8-float vectors, vector i added into
          // accumulator i % 4, the four added in order, then their 8 lanes in order); entries past V count
          // as the zeros torch pads the last block with. Same sums, so the same tokens as the torch path.
          const int64_t lo = k * BLOCK, n = std::min(BLOCK, V - lo);
          const auto chunk = [&](int64_t at) {  // W weights from lo + at, zeros past n
            return at + W <= n ? Vec::loadu(w + lo + at)
                   : at < n    ? Vec::loadu(w + lo + at, static_cast<int>(n - at))
                               : Vec(0.0f);
          };
          float acc8[4][8] = {};
          if constexpr (W == 16) {  // a 16-float vector holds 8-float vectors 2j and 2j + 1
            Vec even(0.0f), odd(0.0f);  // accumulators (0 | 1) and (2 | 3)
            for (int64_t j = 0; j < BLOCK / W; ++j) {
              if (j % 2 == 0) {
                even = even + chunk(j * W);
              } else {
                odd = odd + chunk(j * W);
              }
            }
            alignas(64) float e16[16], o16[16];
            even.store(e16);
            odd.store(o16);
            for (int l = 0; l < 8; ++l) {
              acc8[0][l] = e16[l];
              acc8[1][l] = e16[l + 8];
              acc8[2][l] = o16[l];
              acc8[3][l] = o16[l + 8];
            }
          } else if constexpr (W == 8) {
            Vec acc[4] = {Vec(0.0f), Vec(0.0f), Vec(0.0f), Vec(0.0f)};
            for (int64_t j = 0; j < BLOCK / W; ++j) acc[j % 4] = acc[j % 4] + chunk(j * W);
            for (int a = 0; a < 4; ++a) acc[a].store(acc8[a]);
          } else {
            for (int64_t j = 0; j < n; ++j) acc8[(j / 8) % 4][j % 8] += w[lo + j];
          }
          float bs = 0.0f;
          for (int l = 0; l < 8; ++l) bs += ((acc8[0][l] + acc8[1][l]) + acc8[2][l]) + acc8[3][l];
          run += bs;
          cdf[k] = static_cast<float>(run);
        }
        const float total = cdf[NB - 1];
        const float target = static_cast<float>(u[b] * static_cast<double>(total));
        int64_t block = 0;
        while (block < NB && !(cdf[block] > target)) ++block;
        int64_t last = 0;
        while (last < NB - 1 && cdf[last] < total) ++last;
        block = std::min(block, last);
        const int64_t lo = block * BLOCK, n = std::min(BLOCK, V - lo);
        const float before = block > 0 ? cdf[block - 1] : 0.0f;
        int64_t first = -1, reach = -1;  // first index exceeding the target; first reaching the block's end
        float inner[BLOCK];
        double c = 0.0;
        for (int64_t j = 0; j < n; ++j) {
          c += w[lo + j];
          inner[j] = before + static_cast<float>(c);
        }
        for (int64_t j = 0; j < n && first < 0; ++j)
          if (inner[j] > target) first = j;
        for (int64_t j = 0; j < n && reach < 0; ++j)
          if (inner[j] >= inner[n - 1]) reach = j;
        pick = lo + (first < 0 ? reach : std::min(first, reach));
      }
      token[b] = pick;
      logprob[b] = x[pick] - lse[b];
    }
  }
}
"""

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
_built: dict[tuple[str, torch.dtype], Callable[..., None]] = {}
_lock = threading.Lock()


def _kernel(name: str, dtype: torch.dtype) -> Callable[..., None]:
    """The compiled kernel `name` for `dtype` (built once per process; inductor caches it on disk)."""
    with _lock:
        kernel = _built.get((name, dtype))
        if kernel is None:
            from torch._inductor.codecache import CppPythonBindingsCodeCache

            c_type = _C_TYPES[dtype]
            source, argtypes = _SOURCES[name]
            native = int(dtype == torch.bfloat16 and _native_bf16())
            code = f"#define NATIVE_BF16 {native}\n" + (_PRELUDE + source).replace("SCALAR_T", c_type)
            kernel = CppPythonBindingsCodeCache.load_pybinding(
                [a.replace("scalar_t", c_type) for a in argtypes], code
            )
            _built[(name, dtype)] = kernel
        return kernel


def _native_bf16() -> bool:
    """Whether the kernels may convert to bf16 with AVX-512 BF16's instruction: the CPU has it and
    inductor builds for AVX-512 (the kernels' Vec is then 16 floats). `ART_NATIVE_BF16=0` turns it off."""
    if os.environ.get("ART_NATIVE_BF16", "1") == "0":
        return False
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
    _kernel("attention", q_BH1D.dtype)(*args)
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


def lora_b_add(y_MX: torch.Tensor, bt: LoraBT) -> torch.Tensor:
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
    _kernel("lora_b_add", y_MX.dtype)(y_MX, *bt.args()[:3], out, M, N, R)
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
    _kernel("add_rms_norm", x.dtype)(
        x, y if y is not None else x, weight.contiguous(), s, h, M, E, int(y is not None), float(eps), *lora,
        E + lora[3],
    )  # fmt: skip
    return s, h


def swiglu(gate_up: torch.Tensor, lora_bt: LoraBT | None = None) -> torch.Tensor:
    """silu(gate) * up for gate_up = [gate | up] [..., 2F] contiguous: [..., F], rounded as torch does.

    lora_bt: gate_up is an extended folded-LoRA product [..., 2F + R] and this its B^T over 2F columns
    (`float_lora_bt`), added first exactly as `lora_b_add` would."""
    if not gate_up.is_contiguous():
        raise ValueError("swiglu: gate_up must be contiguous")
    F2 = lora_bt.columns if isinstance(lora_bt, LoraBT) else gate_up.shape[-1]
    lora = _lora_args(gate_up, F2, lora_bt, "swiglu")
    out = torch.empty((*gate_up.shape[:-1], F2 // 2), dtype=gate_up.dtype, device=gate_up.device)
    M = gate_up.numel() // (F2 + lora[3])
    _kernel("swiglu", gate_up.dtype)(gate_up, out, M, F2 // 2, *lora, F2 + lora[3])
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
    _kernel("rope_qkv", qkv_BO.dtype)(
        qkv_BO, cos_PD.contiguous(), signed_sin_PD.contiguous(), positions, q, keys_SKPD, values_SKPD,
        B, heads, K, D, st[0], st[1], st[2], *lora, N + lora[3],
    )  # fmt: skip
    return q.view(B, heads, 1, D)


def causal_softmax(scores_NRT: torch.Tensor, scale: float) -> torch.Tensor:
    """Causal attention probabilities: softmax(scores * scale) of each query row over key positions 0..i,
    zeros after, where row r of the last two dimensions [R, T] is query position i = r % T (R a multiple of
    T: several heads' rows stacked); contiguous; the result in its dtype, float32 inside."""
    T = scores_NRT.shape[-1]
    if not scores_NRT.is_contiguous() or scores_NRT.dim() < 2 or scores_NRT.shape[-2] % T:
        raise ValueError(
            f"causal_softmax: scores must be contiguous [..., k*T, T], got {tuple(scores_NRT.shape)}"
        )
    probs = torch.empty_like(scores_NRT)
    _kernel("causal_softmax", scores_NRT.dtype)(scores_NRT, probs, scores_NRT.numel() // T, T, float(scale))
    return probs


def causal_softmax_backward(
    probs_NTT: torch.Tensor, grad_probs_NTT: torch.Tensor, scale: float
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
    _kernel("causal_softmax_backward", probs_NTT.dtype)(
        probs_NTT, grad_probs_NTT, grad_scores, probs_NTT.numel() // T, T, float(scale)
    )
    return grad_scores


def head_softmax(logits_NV: torch.Tensor, targets_N: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
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
    _kernel("head_softmax", logits_NV.dtype)(logits_NV, targets, logprob, entropy, N, V)
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
    _kernel("sample", torch.float32)(
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


_usable: dict[tuple[torch.dtype, str], bool] = {}


def usable(dtype: torch.dtype, device: torch.device, *sizes: int) -> bool:
    """Whether to use these kernels here: `supported` for these sizes, and, once per dtype and process,
    every kernel builds and gives the numbers of the torch ops it replaces on random inputs (`_self_check`).
    Any failure means False from then on, with a warning naming it."""
    if not supported(dtype, device, *sizes):
        return False
    key = (dtype, device.type)
    with _lock:
        known = _usable.get(key)
    if known is None:
        try:
            _self_check(dtype, device)
            known = True
        except Exception as exc:  # no C++ compiler, a toolchain problem, a mismatch
            log.warning("the C++ kernels are unavailable for %s here (%s); using torch ops", dtype, exc)
            known = False
        with _lock:
            _usable[key] = known
    return known


def _self_check(dtype: torch.dtype, device: torch.device) -> None:
    """Raise unless every kernel matches the torch ops it replaces (the references below) on random data."""
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
    s, h = add_rms_norm(x, y, w, 1e-5)
    ref = (x + y).float()
    ref_h = w * (ref * torch.rsqrt(ref.pow(2).mean(-1, keepdim=True) + 1e-5)).to(dtype)
    close("add_rms_norm (sum)", s, x + y)
    close("add_rms_norm", h, ref_h)
    gu = rand(3, 64, scale=3.0)
    close("swiglu", swiglu(gu), F.silu(gu[:, :32]) * gu[:, 32:])
    yb, b = rand(3, 48 + 8), rand(48, 8, scale=0.2)
    b[:16, 4:] = 0  # block-diagonal, as a folded group's B: runs of columns that use some of the ranks
    b[16:32, :4] = 0
    close("lora_b_add", lora_b_add(yb, float_lora_bt(b)), yb[:, :48] + F.linear(yb[:, 48:].contiguous(), b))
    scores, grad_p = rand(2, 18, 18, scale=3.0), rand(2, 18, 18)
    causal = torch.ones(18, 18, dtype=torch.bool, device=device).triu(1)
    ref_p = torch.softmax((scores.float() * 0.5).masked_fill(causal, float("-inf")), -1)
    ref_grad = ref_p * (grad_p.float() - (ref_p * grad_p.float()).sum(-1, keepdim=True)) * 0.5  # softmax'
    probs = causal_softmax(scores, 0.5)
    close("causal_softmax", probs, ref_p)
    close("causal_softmax_backward", causal_softmax_backward(probs, grad_p, 0.5), ref_grad)
    logits, targets = rand(3, 40, scale=4.0), torch.tensor([0, 17, 39], device=device)
    ref_logp = torch.log_softmax(logits.float(), -1)
    got_logp, got_entropy = head_softmax(logits, targets)
    close("head_softmax (probs)", logits, ref_logp.exp())
    close("head_softmax (logprob)", got_logp, ref_logp.gather(-1, targets[:, None]).squeeze(-1))
    close("head_softmax (entropy)", got_entropy, -(ref_logp.exp() * ref_logp).sum(-1))
    from art.inference.sampling import sample, uniforms

    sample_logits = (torch.randn(4, 512, generator=gen, device=device) * 3.0).contiguous()
    temperature, seeds = torch.tensor([1.0, 0.7, 0.0, 1.3], device=device), torch.arange(4, device=device)
    counters = torch.arange(4, device=device) * 5
    reference = sample(sample_logits, temperature, torch.ones(4, device=device), seeds, counters)
    tokens, logprobs, _ = sample_rows(
        sample_logits, temperature, uniforms(seeds, counters), torch.empty_like(sample_logits)
    )
    if not torch.equal(tokens, reference.token_ids_B):
        raise RuntimeError(f"sample_rows picked {tokens.tolist()}, torch {reference.token_ids_B.tolist()}")
    close("sample_rows (logprobs)", logprobs, reference.logprobs_B)
    H, K, D, P = 2, 1, 32, 9
    qkv, cos, ssin = rand(2, (H + 2 * K) * D), rand(P, D), rand(P, D)
    positions = torch.tensor([3, 7], device=device)
    keys, values = rand(3, K, P, D), rand(3, K, P, D)
    q = rope_qkv(qkv, cos, ssin, positions, keys, values, H)
    x4 = qkv.view(2, H + 2 * K, D)
    rot = x4 * cos[positions][:, None] + x4.roll(D // 2, dims=-1) * ssin[positions][:, None]
    close("rope_qkv (q)", q[:, :, 0], rot[:, :H])
    close("rope_qkv (k)", keys[torch.arange(2), :, positions], rot[:, H : H + K])
    close("rope_qkv (v)", values[torch.arange(2), :, positions], x4[:, H + K :])
