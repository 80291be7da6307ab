
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
