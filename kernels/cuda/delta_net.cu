// The gated DeltaNet token mixer and the gated attention output on CUDA.
// Semantics and preconditions: kernels/ops.h; the CPU twin is
// kernels/cpu/delta_net.cc, whose sums these keep in the same order.
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

constexpr int kMaxKernel = 16;
constexpr int kMaxHeadDim = 256;

__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float Silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float Softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// --- Kernels -----------------------------------------------------------------

// One thread per channel (grid-stride): the channel's window of inputs in
// registers, the tokens in order.
__global__ void DeltaNetConvKernel(const float* x,         // (n_tokens, channels)
                                   const float* taps,      // (channels, kernel)
                                   const float* state_in,  // (kernel - 1, channels)
                                   float* state_out,       // (kernel - 1, channels)
                                   float* out,             // (n_tokens, channels)
                                   DeltaNetConvParams p) {
  const int64_t channels = p.channels;
  const int history = p.kernel - 1;
  for (int64_t c = GridStrideBegin(); c < channels; c += GridStrideStep()) {
    float window[kMaxKernel];
    for (int j = 0; j < history; ++j) window[j] = state_in[j * channels + c];
    for (int t = 0; t < p.n_tokens; ++t) {
      window[history] = x[t * channels + c];
      float sum = 0.0f;
      for (int j = 0; j < p.kernel; ++j) sum += taps[c * p.kernel + j] * window[j];
      out[t * channels + c] = Silu(sum);
      for (int j = 0; j < history; ++j) window[j] = window[j + 1];
    }
    for (int j = 0; j < history; ++j) state_out[j * channels + c] = window[j];
  }
}

// One block per value head, thread j owning column j (value dim j) of the
// head's state, which stays in global memory (rows of a column are
// head_dim apart, so a warp's accesses to one row are contiguous). Thread 0
// takes the L2 sums in index order, as the CPU does.
// Launch: grid (v_heads), block (head_dim).
__global__ void GatedDeltaRuleKernel(const float* qkv, const float* b, const float* a, const float* dt_bias,
                                     const float* decay, const float* state_in, float* state_out, float* out,
                                     GatedDeltaRuleParams p) {
  __shared__ float q[kMaxHeadDim];
  __shared__ float k[kMaxHeadDim];
  __shared__ float scales[2];
  const int d = p.head_dim, h = blockIdx.x, j = threadIdx.x, r = p.v_heads / p.k_heads;
  const int kh = p.grouped_heads ? h / r : h % p.k_heads;
  const int64_t b_at = p.grouped_ba ? (h / r) * 2 * r + h % r : h;
  const int64_t a_at = p.grouped_ba ? b_at + r : h;
  const float out_scale = 1.0f / sqrtf(static_cast<float>(d));
  float* s = state_out + static_cast<int64_t>(h) * d * d;
  const float* s_in = state_in + static_cast<int64_t>(h) * d * d;
  if (s != s_in) {
    for (int i = 0; i < d; ++i) s[i * d + j] = s_in[i * d + j];
  }
  for (int t = 0; t < p.n_tokens; ++t) {
    const float* row = qkv + t * p.qkv_stride;
    q[j] = row[kh * d + j];
    k[j] = row[(p.k_heads + kh) * d + j];
    __syncthreads();  // q and k are loaded
    if (j == 0) {
      float qs = 0.0f, ks = 0.0f;
      for (int i = 0; i < d; ++i) qs += q[i] * q[i];
      for (int i = 0; i < d; ++i) ks += k[i] * k[i];
      scales[0] = 1.0f / fmaxf(sqrtf(qs), p.eps);
      scales[1] = 1.0f / fmaxf(sqrtf(ks), p.eps);
    }
    __syncthreads();  // the scales are written
    const float q_scale = scales[0], k_scale = scales[1];
    const float beta = Sigmoid(b[t * p.ba_stride + b_at]);
    const float keep = expf(Softplus(a[t * p.ba_stride + a_at] + dt_bias[h]) * decay[h]);
    float mem = 0.0f;
    for (int i = 0; i < d; ++i) {
      const float decayed = s[i * d + j] * keep;
      s[i * d + j] = decayed;
      mem += decayed * (k[i] * k_scale);
    }
    const float delta = (row[(2 * p.k_heads + h) * d + j] - mem) * beta;
    float acc = 0.0f;
    for (int i = 0; i < d; ++i) {
      const float updated = s[i * d + j] + (k[i] * k_scale) * delta;
      s[i * d + j] = updated;
      acc += updated * (q[i] * q_scale);
    }
    out[(static_cast<int64_t>(t) * p.v_heads + h) * d + j] = acc * out_scale;
    __syncthreads();  // q and k are read before the next token's
  }
}

__global__ void SplitGatedQueryKernel(const float* qg, float* q, float* gate, int64_t n, int head_dim) {
  for (int64_t i = GridStrideBegin(); i < n; i += GridStrideStep()) {
    const int64_t head = i / head_dim, e = i % head_dim;
    q[i] = qg[head * 2 * head_dim + e];
    gate[i] = qg[head * 2 * head_dim + head_dim + e];
  }
}

__global__ void SigmoidMulKernel(const float* gate, float* x, int64_t n) {
  for (int64_t i = GridStrideBegin(); i < n; i += GridStrideStep()) x[i] *= Sigmoid(gate[i]);
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

absl::Status DeltaNetConv(const float* x, const float* taps, const float* state_in, float* state_out, float* out,
                          const DeltaNetConvParams& p, StreamHandle stream) {
  absl::Status args = CheckDeltaNetConvArgs(x, taps, state_in, state_out, out, p);
  if (!args.ok()) return args;
  OCTO_LAUNCH(DeltaNetConvKernel, ElementwiseBlocks(p.channels), kElementwiseThreads, 0, stream, x, taps, state_in,
              state_out, out, p);
  OCTO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status GatedDeltaRule(const float* qkv, const float* b, const float* a, const float* dt_bias,
                            const float* decay, const float* state_in, float* state_out, float* out,
                            const GatedDeltaRuleParams& p, StreamHandle stream) {
  absl::Status args = CheckGatedDeltaRuleArgs(qkv, b, a, dt_bias, decay, state_in, state_out, out, p);
  if (!args.ok()) return args;
  OCTO_LAUNCH(GatedDeltaRuleKernel, p.v_heads, p.head_dim, 0, stream, qkv, b, a, dt_bias, decay, state_in,
              state_out, out, p);
  OCTO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status SplitGatedQuery(const float* qg, float* q, float* gate, int n_tokens, int n_heads, int head_dim,
                             StreamHandle stream) {
  absl::Status args = CheckSplitGatedQueryArgs(qg, q, gate, n_tokens, n_heads, head_dim);
  if (!args.ok()) return args;
  const int64_t n = int64_t{n_tokens} * n_heads * head_dim;
  OCTO_LAUNCH(SplitGatedQueryKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, qg, q, gate, n, head_dim);
  OCTO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status SigmoidMul(const float* gate, float* x, int64_t n, StreamHandle stream) {
  absl::Status args = CheckSigmoidMulArgs(gate, x, n);
  if (!args.ok()) return args;
  OCTO_LAUNCH(SigmoidMulKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, gate, x, n);
  OCTO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace octo::cuda
