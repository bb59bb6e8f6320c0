// Rotary position embedding on CUDA. Semantics and preconditions:
// kernels/ops.h; the CPU twin is kernels/cpu/rope.cc.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/fused.h"
#include "kernels/cuda/kv_append.cuh"
#include "kernels/cuda/rms_scale.cuh"
#include "kernels/cuda/rope_pair.cuh"
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
// pair)s of a token are spread over blockIdx.y and the threads, each turned
// by RotatePair. No two threads touch the same element, so x is rotated in
// place.
// Launch: gridDim.x == n_tokens, one-dimensional blocks of any size.
//   theta_scale: powf(freq_base, -2 / rope_dim), computed by the launcher
//   as the CPU computes it.
// With k non-null, the k_heads heads of k (n_tokens, k_heads * head_dim)
// follow q's p.n_heads in the same index space (RopeQK's one launch).
__global__ void RopeKernel(float* x,                  // (n_tokens, n_heads * head_dim)
                           const int32_t* positions,  // (n_tokens)
                           RopeParams p, float theta_scale, float* k, int k_heads) {
  GridStart();
  const int n_pairs = p.rope_dim / 2;
  float* x_token = x + static_cast<size_t>(blockIdx.x) * p.n_heads * p.head_dim;
  float* k_token = k + static_cast<size_t>(blockIdx.x) * k_heads * p.head_dim;  // unused without k
  const float pos = static_cast<float>(positions[blockIdx.x]);
  const int64_t n = static_cast<int64_t>(p.n_heads + k_heads) * n_pairs;
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; idx < n; idx += step) {
    const int h = static_cast<int>(idx / n_pairs);
    float* head = h < p.n_heads ? x_token + static_cast<size_t>(h) * p.head_dim
                                : k_token + static_cast<size_t>(h - p.n_heads) * p.head_dim;
    RotatePair(head, static_cast<int>(idx % n_pairs), pos, p, theta_scale);
  }
}

// Heads a block norms (kNorm below) whose values it loads at once.
constexpr int kHeldHeads = 8;

// RopeQK, then KvAppend of the rotated k and of v, in one launch: blocks y <
// gridDim.y - 1 of a token rotate its q as RopeKernel does; the last one
// rotates its k, waits for the block, then encodes the token's key and value
// rows into the caches (kv_blocks.h, what KvAppendKernel runs). So the cache
// gets the bytes of the two launches.
// With kNorm, each head is first RMS-normed in place by its q or k norm
// (qwen3's per-head norm, RmsNorm's expression and its RmsScaleOf, with
// RmsNorm's block size): the q blocks then take whole heads, one at a time,
// the k block all of the token's. Thread t holds element t of a head
// (RowThreads(head_dim) >= head_dim threads): a block loads its norm's
// weights and up to kHeldHeads heads' values before it uses any (one memory
// round trip, not three a head), norms a head into shared memory, turns it
// there (RotatePair's expressions) and stores it.
// Launch: gridDim.x == n_tokens, gridDim.y >= 2, one-dimensional blocks
// (kNorm: RowThreads(head_dim) threads).
template <bool kNorm>
__global__ void RopeAppendKernel(float* q, float* k, const float* v, const int32_t* positions, RopeParams p,
                                 float theta_scale, int k_heads, AppendTarget keys, AppendTarget values,
                                 HeadNorms norms) {
  GridStart();
  const int n_pairs = p.rope_dim / 2;
  const float pos = static_cast<float>(positions[blockIdx.x]);
  // Norms then turns heads first, first + step, ... below end of x (head_dim
  // floats each) with this block's threads.
  auto norm_and_turn = [&](float* x, int first, int end, int step, const float* weight) {
    __shared__ float turned[kMaxCudaHeadDim];
    const int t = static_cast<int>(threadIdx.x);
    const bool owns = t < p.head_dim;
    const float w = owns ? weight[t] : 0.0f;
    for (int h0 = first; h0 < end; h0 += kHeldHeads * step) {
      float held[kHeldHeads] = {};
#pragma unroll
      for (int j = 0; j < kHeldHeads; ++j) {
        const int h = h0 + j * step;
        if (owns && h < end) held[j] = x[static_cast<size_t>(h) * p.head_dim + t];
      }
#pragma unroll
      for (int j = 0; j < kHeldHeads; ++j) {
        const int h = h0 + j * step;
        if (h >= end) break;  // the whole block alike
        double ss = 0.0;
        if (owns) ss += SquareOf(held[j]);
        const float scale = RmsScaleOf(ss, p.head_dim, norms.eps);
        if (owns) turned[t] = held[j] * scale * w;
        __syncthreads();  // the head is normed
        if (t < n_pairs) RotatePair(turned, t, pos, p, theta_scale);
        __syncthreads();  // and turned
        if (owns) x[static_cast<size_t>(h) * p.head_dim + t] = turned[t];
        // The next head writes turned[t] after RmsScaleOf's barriers.
      }
    }
  };
  if (blockIdx.y + 1 < gridDim.y) {
    float* q_token = q + static_cast<size_t>(blockIdx.x) * p.n_heads * p.head_dim;
    if constexpr (kNorm) {
      norm_and_turn(q_token, static_cast<int>(blockIdx.y), p.n_heads, static_cast<int>(gridDim.y - 1), norms.q);
      return;
    }
    const int64_t n = static_cast<int64_t>(p.n_heads) * n_pairs;
    const int64_t step = static_cast<int64_t>(gridDim.y - 1) * blockDim.x;
    for (int64_t idx = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; idx < n; idx += step) {
      RotatePair(q_token + idx / n_pairs * p.head_dim, static_cast<int>(idx % n_pairs), pos, p, theta_scale);
    }
    return;
  }
  const int kv_dim = k_heads * p.head_dim;
  float* k_token = k + static_cast<size_t>(blockIdx.x) * kv_dim;
  if constexpr (kNorm) {
    norm_and_turn(k_token, 0, k_heads, 1, norms.k);
  } else {
    for (int idx = threadIdx.x; idx < k_heads * n_pairs; idx += blockDim.x) {
      RotatePair(k_token + idx / n_pairs * p.head_dim, idx % n_pairs, pos, p, theta_scale);
    }
  }
  __syncthreads();  // the token's k is rotated (global writes, visible to the block)
  const float* v_token = v + static_cast<size_t>(blockIdx.x) * kv_dim;
  const int64_t units = keys.units > values.units ? keys.units : values.units;
  for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
    if (u < keys.units) kv_blocks::EncodeUnit(keys.type, k_token, keys.Row(blockIdx.x), u);
    if (u < values.units) kv_blocks::EncodeUnit(values.type, v_token, values.Row(blockIdx.x), u);
  }
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

namespace {

// Threads and blocks per token for `pairs` (head, pair)s of a token: whole
// warps, at most kRopeThreads; blocks within gridDim.y's limit.
struct RopeShape {
  int threads;
  unsigned blocks;
};
RopeShape ShapeFor(int64_t pairs) {
  const int threads =
      pairs >= kRopeThreads ? kRopeThreads : static_cast<int>((pairs + kWarpSize - 1) / kWarpSize * kWarpSize);
  const int64_t blocks = (pairs + threads - 1) / threads;
  return {threads, static_cast<unsigned>(blocks < kMaxRopeBlocksPerToken ? blocks : kMaxRopeBlocksPerToken)};
}

// The launch over `heads` heads per token (q's, and k's after them when k
// is set). Grid: x one block per token (n_tokens is an int, within
// gridDim.x's 2^31 - 1), y enough blocks for the token's (head, pair)s.
absl::Status LaunchRope(float* x, float* k, int k_heads, const int32_t* positions, int n_tokens, const RopeParams& p,
                        StreamHandle stream) {
  const RopeShape shape = ShapeFor(static_cast<int64_t>(p.n_heads + k_heads) * (p.rope_dim / 2));
  OCTO_LAUNCH(RopeKernel, dim3(n_tokens, shape.blocks), shape.threads, 0, stream, x, positions, p, RopeThetaScale(p), k,
              k_heads);
  return absl::OkStatus();
}

absl::Status CheckRopeQK(float* q, float* k, const int32_t* positions, int n_tokens, const RopeParams& p,
                         int k_heads) {
  RopeParams k_params = p;
  k_params.n_heads = k_heads;
  absl::Status args = CheckRopeArgs(q, positions, n_tokens, p);
  if (!args.ok()) return args;
  if (absl::Status k_args = CheckRopeArgs(k, positions, n_tokens, k_params); !k_args.ok()) return k_args;
  const int64_t q_bytes = int64_t{n_tokens} * p.n_heads * p.head_dim * 4, k_bytes = int64_t{n_tokens} * k_heads * p.head_dim * 4;
  if (Overlaps(q, q_bytes, k, k_bytes)) return absl::InvalidArgumentError("RopeQK: q overlaps k");
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
  if (absl::Status args = CheckRopeQK(q, k, positions, n_tokens, p, k_heads); !args.ok()) return args;
  return LaunchRope(q, k, k_heads, positions, n_tokens, p, stream);
}

absl::Status RopeQKAppend(float* q, float* k, const int32_t* positions, int n_tokens, const RopeParams& p,
                          int k_heads, const float* v, void* k_cache, void* v_cache, int first_pos, KvCacheTypes types,
                          StreamHandle stream, const int32_t* first_pos_at, HeadNorms norms) {
  if (absl::Status args = CheckRopeQK(q, k, positions, n_tokens, p, k_heads); !args.ok()) return args;
  if (first_pos_at != nullptr) first_pos = 0;  // read on the device
  const int kv_dim = k_heads * p.head_dim;
  if (absl::Status args = CheckKvAppendArgs(k, v, n_tokens, kv_dim, k_cache, v_cache, first_pos, types); !args.ok()) {
    return args;
  }
  const AppendTarget keys = TargetOf(k_cache, types.k, kv_dim, first_pos, first_pos_at);
  const AppendTarget values = TargetOf(v_cache, types.v, kv_dim, first_pos, first_pos_at);
  if (norms.q != nullptr) {
    if (norms.k == nullptr || p.head_dim > kMaxCudaHeadDim) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "RopeQKAppend: head norms need both weights and head_dim (%d) <= %d", p.head_dim, kMaxCudaHeadDim));
    }
    // RmsNorm's block for a head; a block per head of q, up to gridDim.y's limit.
    const unsigned q_blocks = static_cast<unsigned>(p.n_heads < kMaxRopeBlocksPerToken ? p.n_heads : kMaxRopeBlocksPerToken - 1);
    OCTO_LAUNCH(RopeAppendKernel<true>, dim3(n_tokens, q_blocks + 1), RowThreads(p.head_dim), 0, stream, q, k, v,
                positions, p, RopeThetaScale(p), k_heads, keys, values, norms);
    return absl::OkStatus();
  }
  const RopeShape shape = ShapeFor(static_cast<int64_t>(p.n_heads) * (p.rope_dim / 2));
  OCTO_LAUNCH(RopeAppendKernel<false>, dim3(n_tokens, shape.blocks + 1), shape.threads, 0, stream, q, k, v, positions,
              p, RopeThetaScale(p), k_heads, keys, values, norms);
  return absl::OkStatus();
}

}  // namespace octo::cuda
