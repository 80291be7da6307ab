
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
