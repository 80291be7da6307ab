
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
