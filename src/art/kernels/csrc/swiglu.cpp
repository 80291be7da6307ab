
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
