
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
