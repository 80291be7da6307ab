
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
