// The gated DeltaNet token mixer and the gated attention output on the
// CPU: plain loops, every sum in index order. Semantics: kernels/ops.h; the
// CUDA twin is kernels/cuda/delta_net.cu.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cpu {
namespace {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float Silu(float x) { return x / (1.0f + std::exp(-x)); }
float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// 1 / max(|x|, eps) over n values, the sum of squares in index order.
float L2Scale(const float* x, int n, float eps) {
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  return 1.0f / std::max(std::sqrt(ss), eps);
}

}  // namespace

absl::Status DeltaNetConv(const float* x, const float* taps, const float* state_in, float* state_out, float* out,
                          const DeltaNetConvParams& p, const Exec& exec) {
  absl::Status args = CheckDeltaNetConvArgs(x, taps, state_in, state_out, out, p);
  if (!args.ok()) return args;
  const int64_t channels = p.channels;
  const int history = p.kernel - 1;
  // Channels [begin, end): each its window of inputs, the tokens in order.
  auto run = [&](int64_t begin, int64_t end) {
    float window[16];
    for (int64_t c = begin; c < end; ++c) {
      for (int j = 0; j < history; ++j) window[j] = state_in[j * channels + c];
      for (int t = 0; t < p.n_tokens; ++t) {
        window[history] = x[t * channels + c];
        float sum = 0.0f;
        for (int j = 0; j < p.kernel; ++j) sum += taps[c * p.kernel + j] * window[j];
        out[t * channels + c] = Silu(sum);
        for (int j = 0; j < history; ++j) window[j] = window[j + 1];
      }
      // The last `history` inputs of this channel, oldest first.
      for (int j = 0; j < history; ++j) state_out[j * channels + c] = window[j];
    }
  };
  if (exec.pool != nullptr) {
    exec.pool->ParallelForRange(channels, run);
  } else {
    run(0, channels);
  }
  return absl::OkStatus();
}

namespace {

// One value head of GatedDeltaRule: where its inputs sit, and the two forms
// over its state s (s[i * d + j], key dim i, value dim j).
struct DeltaHead {
  const float *qkv, *b, *a, *dt_bias, *decay;
  float* out;
  const GatedDeltaRuleParams& p;
  int h, kh;
  int64_t b_at, a_at;
  float out_scale;

  // Token t's query and key, L2-normalised, into q and k (d each).
  void QueryKey(int t, float* q, float* k) const {
    const int d = p.head_dim;
    const float* row = qkv + t * p.qkv_stride;
    std::copy(row + kh * d, row + (kh + 1) * d, q);
    std::copy(row + (p.k_heads + kh) * d, row + (p.k_heads + kh + 1) * d, k);
    const float q_scale = L2Scale(q, d, p.eps), k_scale = L2Scale(k, d, p.eps);
    for (int i = 0; i < d; ++i) {
      q[i] *= q_scale;
      k[i] *= k_scale;
    }
  }
  const float* Value(int t) const { return qkv + t * p.qkv_stride + (2 * p.k_heads + h) * p.head_dim; }
  float Beta(int t) const { return Sigmoid(b[t * p.ba_stride + b_at]); }
  float LogKeep(int t) const { return Softplus(a[t * p.ba_stride + a_at] + dt_bias[h]) * decay[h]; }

  // The step form for token t.
  void Step(int t, float* s) const {
    const int d = p.head_dim;
    std::vector<float> q(d), k(d), delta(d);
    QueryKey(t, q.data(), k.data());
    const float* v = Value(t);
    const float beta = Beta(t), keep = std::exp(LogKeep(t));
    for (int64_t e = 0; e < int64_t{d} * d; ++e) s[e] *= keep;
    for (int j = 0; j < d; ++j) {
      float mem = 0.0f;
      for (int i = 0; i < d; ++i) mem += s[i * d + j] * k[i];
      delta[j] = (v[j] - mem) * beta;
    }
    for (int i = 0; i < d; ++i) {
      for (int j = 0; j < d; ++j) s[i * d + j] += k[i] * delta[j];
    }
    float* o = out + (int64_t{t} * p.v_heads + h) * d;
    for (int j = 0; j < d; ++j) {
      float acc = 0.0f;
      for (int i = 0; i < d; ++i) acc += s[i * d + j] * q[i];
      o[j] = acc * out_scale;
    }
  }

  // The chunked form for tokens [t0, t0 + L). Loops run key dims outside
  // value dims, so each sum over i (or over earlier tokens) still adds its
  // terms in index order while the inner loop runs along a row.
  void Chunk(int t0, int L, float* s) const {
    const int d = p.head_dim;
    std::vector<float> q(size_t(L) * d), k(size_t(L) * d), g(L), e(L), w(L), beta(L);
    std::vector<float> akk(size_t(L) * L), aqk(size_t(L) * L);
    for (int t = 0; t < L; ++t) {
      QueryKey(t0 + t, &q[size_t(t) * d], &k[size_t(t) * d]);
      beta[t] = Beta(t0 + t);
      g[t] = t == 0 ? LogKeep(t0) : g[t - 1] + LogKeep(t0 + t);
    }
    for (int t = 0; t < L; ++t) {
      e[t] = std::exp(g[t]);
      w[t] = std::exp(g[L - 1] - g[t]);
      for (int i = 0; i <= t; ++i) {
        float kk = 0.0f, qk = 0.0f;
        for (int x = 0; x < d; ++x) kk += k[size_t(t) * d + x] * k[size_t(i) * d + x];
        for (int x = 0; x < d; ++x) qk += q[size_t(t) * d + x] * k[size_t(i) * d + x];
        const float scale = std::exp(g[t] - g[i]);
        akk[size_t(t) * L + i] = i < t ? scale * kk : 0.0f;
        aqk[size_t(t) * L + i] = scale * qk;
      }
    }
    // S^T k_t and S^T q_t for every token, from the state before the chunk.
    std::vector<float> sk(size_t(L) * d), sq(size_t(L) * d), delta(size_t(L) * d);
    for (int t = 0; t < L; ++t) {
      float* skt = &sk[size_t(t) * d];
      float* sqt = &sq[size_t(t) * d];
      for (int j = 0; j < d; ++j) {
        skt[j] = s[j] * k[size_t(t) * d];
        sqt[j] = s[j] * q[size_t(t) * d];
      }
      for (int i = 1; i < d; ++i) {
        for (int j = 0; j < d; ++j) {
          skt[j] += s[i * d + j] * k[size_t(t) * d + i];
          sqt[j] += s[i * d + j] * q[size_t(t) * d + i];
        }
      }
    }
    std::vector<float> acc(d);
    for (int t = 0; t < L; ++t) {
      const float* v = Value(t0 + t);
      float* dt = &delta[size_t(t) * d];
      for (int j = 0; j < d; ++j) acc[j] = e[t] * sk[size_t(t) * d + j];
      for (int i = 0; i < t; ++i) {
        for (int j = 0; j < d; ++j) acc[j] += akk[size_t(t) * L + i] * delta[size_t(i) * d + j];
      }
      for (int j = 0; j < d; ++j) dt[j] = (v[j] - acc[j]) * beta[t];
      for (int j = 0; j < d; ++j) acc[j] = e[t] * sq[size_t(t) * d + j];
      for (int i = 0; i <= t; ++i) {
        for (int j = 0; j < d; ++j) acc[j] += aqk[size_t(t) * L + i] * delta[size_t(i) * d + j];
      }
      float* o = out + (int64_t{t0 + t} * p.v_heads + h) * d;
      for (int j = 0; j < d; ++j) o[j] = acc[j] * out_scale;
    }
    for (int i = 0; i < d; ++i) {
      float* si = s + size_t(i) * d;
      for (int j = 0; j < d; ++j) si[j] *= e[L - 1];
      for (int t = 0; t < L; ++t) {
        const float wk = w[t] * k[size_t(t) * d + i];
        for (int j = 0; j < d; ++j) si[j] += wk * delta[size_t(t) * d + j];
      }
    }
  }
};

}  // namespace

absl::Status GatedDeltaRule(const float* qkv, const float* b, const float* a, const float* dt_bias,
                            const float* decay, const float* state_in, float* state_out, float* out,
                            const GatedDeltaRuleParams& p, const Exec& exec) {
  absl::Status args = CheckGatedDeltaRuleArgs(qkv, b, a, dt_bias, decay, state_in, state_out, out, p);
  if (!args.ok()) return args;
  const int d = p.head_dim, r = p.v_heads / p.k_heads;
  const DeltaRuleSplit split = SplitDeltaRule(p);
  // Value head h: its state through the tokens in order.
  auto head = [&](int64_t h) {
    float* s = state_out + h * d * d;
    if (state_out != state_in) std::memcpy(s, state_in + h * d * d, sizeof(float) * d * d);
    const int64_t b_at = p.grouped_ba ? (h / r) * 2 * r + h % r : h;
    const DeltaHead one{.qkv = qkv,
                        .b = b,
                        .a = a,
                        .dt_bias = dt_bias,
                        .decay = decay,
                        .out = out,
                        .p = p,
                        .h = static_cast<int>(h),
                        .kh = p.grouped_heads ? static_cast<int>(h) / r : static_cast<int>(h) % p.k_heads,
                        .b_at = b_at,
                        .a_at = p.grouped_ba ? b_at + r : h,
                        .out_scale = 1.0f / std::sqrt(static_cast<float>(d))};
    for (int t = 0; t < split.lead; ++t) one.Step(t, s);
    for (int t = split.lead; t < split.lead + split.whole; t += p.chunk) one.Chunk(t, p.chunk, s);
    for (int t = split.lead + split.whole; t < p.n_tokens; ++t) one.Step(t, s);
  };
  if (exec.pool != nullptr) {
    exec.pool->ParallelFor(p.v_heads, head);
  } else {
    for (int h = 0; h < p.v_heads; ++h) head(h);
  }
  return absl::OkStatus();
}

absl::Status SplitGatedQuery(const float* qg, float* q, float* gate, int n_tokens, int n_heads, int head_dim) {
  absl::Status args = CheckSplitGatedQueryArgs(qg, q, gate, n_tokens, n_heads, head_dim);
  if (!args.ok()) return args;
  for (int64_t th = 0; th < int64_t{n_tokens} * n_heads; ++th) {
    std::memcpy(q + th * head_dim, qg + th * 2 * head_dim, sizeof(float) * head_dim);
    std::memcpy(gate + th * head_dim, qg + th * 2 * head_dim + head_dim, sizeof(float) * head_dim);
  }
  return absl::OkStatus();
}

absl::Status SigmoidMul(const float* gate, float* x, int64_t n) {
  absl::Status args = CheckSigmoidMulArgs(gate, x, n);
  if (!args.ok()) return args;
  for (int64_t i = 0; i < n; ++i) x[i] *= Sigmoid(gate[i]);
  return absl::OkStatus();
}

}  // namespace octo::cpu
