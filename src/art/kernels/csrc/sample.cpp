
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
