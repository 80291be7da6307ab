
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
