// Rotary position embedding on CUDA. Semantics and preconditions:
// kernels/ops.h; the CPU twin is kernels/cpu/rope.cc.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/common.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

// Threads per block: up to one (head, pair) each of one token.
constexpr int kRopeThreads = 256;
// Blocks per token (gridDim.y), at most: a token with more (head, pair)s than
// kRopeThreads * kMaxRopeBlocksPerToken has its threads stride over them.
constexpr int kMaxRopeBlocksPerToken = 65535;  // gridDim.y's limit

// --- Kernels -----------------------------------------------------------------

// One thread per (token, head, pair): blockIdx.x is the token, the (head,
// pair)s of a token are spread over blockIdx.y and the threads. A thread
// computes its pair's angle as the CPU does (pos, times theta_scale once per
// pair before it, in float; divided by the pair's frequency factor), its
// cos and sin, and turns its two elements. No two threads touch the same
// element, so x is rotated in place.
// Launch: gridDim.x == n_tokens, one-dimensional blocks of any size.
//   theta_scale: powf(freq_base, -2 / rope_dim), computed by the launcher
//   as the CPU computes it.
// With k non-null, the k_heads heads of k (n_tokens, k_heads * head_dim)
// follow q's p.n_heads in the same index space (RopeQK's one launch).
__global__ void RopeKernel(float* x,                  // (n_tokens, n_heads * head_dim)
                           const int32_t* positions,  // (n_tokens)
                           RopeParams p, float theta_scale, float* k, int k_heads) {
  const int n_pairs = p.rope_dim / 2;
  // Pair i is (x[2i], x[2i+1]) in normal mode, (x[i], x[i + n_pairs]) in neox.
  const int pair_stride = p.neox ? 1 : 2;
  const int partner_offset = p.neox ? n_pairs : 1;
  float* x_token = x + static_cast<size_t>(blockIdx.x) * p.n_heads * p.head_dim;
  float* k_token = k + static_cast<size_t>(blockIdx.x) * k_heads * p.head_dim;  // unused without k
  const float pos = static_cast<float>(positions[blockIdx.x]);
  const int64_t n = static_cast<int64_t>(p.n_heads + k_heads) * n_pairs;
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; idx < n; idx += step) {
    const int h = static_cast<int>(idx / n_pairs);
    const int i = static_cast<int>(idx % n_pairs);
    // theta_i = pos * theta_scale^i, multiplied up pair by pair in float as
    // the CPU (and ggml) does: i roundings, the same bits.
    float theta = pos;
    for (int m = 0; m < i; ++m) theta *= theta_scale;
    const float angle = p.freq_factors != nullptr ? theta / p.freq_factors[i] : theta;
    const float cos_theta = cosf(angle);
    const float sin_theta = sinf(angle);

    float* first = h < p.n_heads ? x_token + static_cast<size_t>(h) * p.head_dim + i * pair_stride
                                 : k_token + static_cast<size_t>(h - p.n_heads) * p.head_dim + i * pair_stride;
    float* second = first + partner_offset;
    const float x0 = *first;
    const float x1 = *second;
    *first = x0 * cos_theta - x1 * sin_theta;
    *second = x0 * sin_theta + x1 * cos_theta;
  }
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

namespace {

// The launch over `heads` heads per token (q's, and k's after them when k
// is set).
absl::Status LaunchRope(float* x, float* k, int k_heads, const int32_t* positions, int n_tokens, const RopeParams& p,
                        StreamHandle stream) {
  // The CPU's expression (std::pow on floats is powf), on the host: the
  // device's powf may differ in the last bit.
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.rope_dim));
  // Grid: x one block per token (n_tokens is an int, within gridDim.x's
  // 2^31 - 1), y enough blocks for the token's (head, pair)s. Block: whole
  // warps, at most kRopeThreads.
  const int64_t per_token = static_cast<int64_t>(p.n_heads + k_heads) * (p.rope_dim / 2);
  const int threads = per_token >= kRopeThreads ? kRopeThreads
                                                : static_cast<int>((per_token + kWarpSize - 1) / kWarpSize * kWarpSize);
  const int64_t blocks = (per_token + threads - 1) / threads;
  const dim3 grid(n_tokens, static_cast<unsigned>(blocks < kMaxRopeBlocksPerToken ? blocks : kMaxRopeBlocksPerToken));
  OCTO_LAUNCH(RopeKernel, grid, threads, 0, stream, x, positions, p, theta_scale, k, k_heads);
  return absl::OkStatus();
}

}  // namespace

absl::Status Rope(float* x, const int32_t* positions, int n_tokens, const RopeParams& p, StreamHandle stream) {
  absl::Status args = CheckRopeArgs(x, positions, n_tokens, p);
  if (!args.ok()) return args;
  return LaunchRope(x, nullptr, 0, positions, n_tokens, p, stream);
}

absl::Status RopeQK(float* q, float* k, const int32_t* positions, int n_tokens, const RopeParams& p, int k_heads,
                    StreamHandle stream) {
  RopeParams k_params = p;
  k_params.n_heads = k_heads;
  absl::Status args = CheckRopeArgs(q, positions, n_tokens, p);
  if (args.ok()) args = CheckRopeArgs(k, positions, n_tokens, k_params);
  if (!args.ok()) return args;
  const int64_t q_bytes = int64_t{n_tokens} * p.n_heads * p.head_dim * 4, k_bytes = int64_t{n_tokens} * k_heads * p.head_dim * 4;
  if (Overlaps(q, q_bytes, k, k_bytes)) return absl::InvalidArgumentError("RopeQK: q overlaps k");
  return LaunchRope(q, k, k_heads, positions, n_tokens, p, stream);
}

}  // namespace octo::cuda
