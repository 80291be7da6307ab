
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
