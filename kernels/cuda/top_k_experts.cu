// Mixture-of-experts routing on CUDA. Semantics and preconditions:
// kernels/ops.h; the CPU twin is kernels/cpu/top_k_experts.cc.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/softmax_row.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

// llama.cpp clamps the sum of the chosen weights to at least 2^-14, the
// smallest normal fp16, before dividing by it (as the CPU twin does).
constexpr float kMinWeightSum = 6.103515625e-5f;

// An expert as the arg-max sees it. Experts are ranked by key, the larger
// first, then by id, the lower first: a strict total order, so a round's pick
// does not depend on which thread saw which expert. The key is the expert's
// probability, or -1 for NaN (a row with NaN or +inf logits: every
// probability is NaN, so the ids come out 0, 1, .., k - 1, the weights NaN).
struct Candidate {
  float key;
  int id;
};

// Ranks below every expert: what a thread with no candidate contributes.
constexpr int kNoExpert = INT32_MAX;

__device__ __forceinline__ float RankKey(float p) { return p == p ? p : -1.0f; }

// Whether a ranks before b.
__device__ __forceinline__ bool RanksBefore(const Candidate& a, const Candidate& b) {
  return a.key > b.key || (a.key == b.key && a.id < b.id);
}

// The candidate of a one-dimensional block that ranks first, returned to
// every thread. Requirements as BlockReduceSum's (common.cuh).
__device__ __forceinline__ Candidate BlockArgMax(Candidate c) {
  __shared__ float warp_keys[kMaxBlockSize / kWarpSize];
  __shared__ int warp_ids[kMaxBlockSize / kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int n_warps = blockDim.x / kWarpSize;

  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const Candidate other{__shfl_xor_sync(0xffffffffu, c.key, offset), __shfl_xor_sync(0xffffffffu, c.id, offset)};
    if (RanksBefore(other, c)) c = other;
  }
  __syncthreads();  // a previous call may still be reading warp_keys and warp_ids
  if (lane == 0) {
    warp_keys[warp] = c.key;
    warp_ids[warp] = c.id;
  }
  __syncthreads();  // every warp's pick is written
  c = lane < n_warps ? Candidate{warp_keys[lane], warp_ids[lane]} : Candidate{-INFINITY, kNoExpert};
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const Candidate other{__shfl_xor_sync(0xffffffffu, c.key, offset), __shfl_xor_sync(0xffffffffu, c.id, offset)};
    if (RanksBefore(other, c)) c = other;
  }
  return c;
}

// --- Kernels -----------------------------------------------------------------

// One block per token: the softmax scale of its logits (as cuda::Softmax's),
// then k rounds, round j picking the expert that ranks first among those
// ranking after round j - 1's pick. The probabilities are recomputed from
// the logits in every round (same bits each time), so no row of them is
// kept and n_experts has no limit. Thread 0 writes the picks and normalizes.
// Launch: gridDim.x == n_tokens, blockDim.x == SoftmaxThreads(n_experts).
__global__ void TopKExpertsKernel(const float* router_logits,  // (n_tokens, n_experts)
                                  int n_experts, int k, bool normalize,
                                  int32_t* expert_ids,  // (n_tokens, k)
                                  float* weights) {     // (n_tokens, k)
  GridStart();
  const float* logits = router_logits + static_cast<size_t>(blockIdx.x) * n_experts;
  int32_t* ids = expert_ids + static_cast<size_t>(blockIdx.x) * k;
  float* w = weights + static_cast<size_t>(blockIdx.x) * k;

  const SoftmaxScale scale = BlockSoftmaxScale(logits, n_experts);
  Candidate last{INFINITY, -1};  // ranks before every expert
  float sum = 0.0f;              // of the weights picked so far, in pick order (thread 0's)
  for (int j = 0; j < k; ++j) {
    Candidate best{-INFINITY, kNoExpert};
    for (int e = threadIdx.x; e < n_experts; e += blockDim.x) {
      const Candidate c{RankKey(SoftmaxProb(logits[e], scale)), e};
      if (RanksBefore(last, c) && RanksBefore(c, best)) best = c;
    }
    last = BlockArgMax(best);
    if (threadIdx.x == 0) {
      const float p = SoftmaxProb(logits[last.id], scale);
      ids[j] = last.id;
      w[j] = p;
      sum += p;
    }
  }
  if (normalize && threadIdx.x == 0) {
    // The CPU's std::max(sum, kMinWeightSum): a NaN sum stays NaN.
    const float divisor = sum < kMinWeightSum ? kMinWeightSum : sum;
    for (int j = 0; j < k; ++j) w[j] = w[j] / divisor;
  }
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

absl::Status TopKExperts(const float* router_logits, int n_tokens, int n_experts, int k, bool normalize,
                         int32_t* expert_ids, float* weights, StreamHandle stream) {
  absl::Status args = CheckTopKExpertsArgs(router_logits, n_tokens, n_experts, k, expert_ids, weights);
  if (!args.ok()) return args;
  // Grid: one block per token; the block size is cuda::Softmax's for a row of
  // n_experts, so the probabilities are its bits.
  OCTO_LAUNCH(TopKExpertsKernel, n_tokens, SoftmaxThreads(n_experts), 0, stream, router_logits, n_experts, k,
              normalize, expert_ids, weights);
  return absl::OkStatus();
}

}  // namespace octo::cuda
