
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
