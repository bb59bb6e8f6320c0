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

absl::Status GatedDeltaRule(const float* qkv, const float* b, const float* a, const float* dt_bias,
                            const float* decay, const float* state_in, float* state_out, float* out,
                            const GatedDeltaRuleParams& p, const Exec& exec) {
  absl::Status args = CheckGatedDeltaRuleArgs(qkv, b, a, dt_bias, decay, state_in, state_out, out, p);
  if (!args.ok()) return args;
  const int d = p.head_dim, r = p.v_heads / p.k_heads;
  const float out_scale = 1.0f / std::sqrt(static_cast<float>(d));
  // Value head h: its state through the tokens in order.
  auto head = [&](int64_t h) {
    float* s = state_out + h * d * d;  // s[i * d + j]
    if (state_out != state_in) std::memcpy(s, state_in + h * d * d, sizeof(float) * d * d);
    const int kh = p.grouped_heads ? static_cast<int>(h) / r : static_cast<int>(h) % p.k_heads;
    const int64_t b_at = p.grouped_ba ? (h / r) * 2 * r + h % r : h;
    const int64_t a_at = p.grouped_ba ? b_at + r : h;
    std::vector<float> q(d), k(d), delta(d);
    for (int t = 0; t < p.n_tokens; ++t) {
      const float* row = qkv + t * p.qkv_stride;
      std::copy(row + kh * d, row + (kh + 1) * d, q.begin());
      std::copy(row + (p.k_heads + kh) * d, row + (p.k_heads + kh + 1) * d, k.begin());
      const float q_scale = L2Scale(q.data(), d, p.eps), k_scale = L2Scale(k.data(), d, p.eps);
      for (int i = 0; i < d; ++i) {
        q[i] *= q_scale;
        k[i] *= k_scale;
      }
      const float* v = row + (2 * p.k_heads + h) * d;
      const float beta = Sigmoid(b[t * p.ba_stride + b_at]);
      const float keep = std::exp(Softplus(a[t * p.ba_stride + a_at] + dt_bias[h]) * decay[h]);
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
