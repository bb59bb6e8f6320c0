// One token's mixture-of-experts routing (ops.h's TopKExperts) as a CUDA
// block computes it: cuda::TopKExperts's kernel (a block a token) and the
// router MatMul's last block (matmul_decode.cu's RouterKernel, fused.h's
// MatMulTopKExperts) run this one routine, so the two give the same ids and
// weights bit for bit. Internal to kernels/cuda.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/softmax_row.cuh"

namespace octo::cuda::top_k {

// llama.cpp clamps the sum of the chosen weights to at least 2^-14, the
// smallest normal fp16, before dividing by it (as the CPU twin does).
constexpr float kMinWeightSum = 6.103515625e-5f;

// An expert as the arg-max sees it. Experts are ranked by key, the larger
// first, then by id, the lower first: a strict total order, so a round's pick
// does not depend on which thread saw which expert (nor on the block's size).
// The key is the expert's probability, or -1 for NaN (a row with NaN or +inf
// logits: every probability is NaN, so the ids come out 0, 1, .., k - 1, the
// weights NaN).
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

// One token: the softmax scale of its logits (cuda::Softmax's bits, the
// block playing SoftmaxThreads(n_experts) threads), then k rounds, round j
// picking the expert that ranks first among those ranking after round j -
// 1's pick. The probabilities are recomputed from the logits in every round
// (same bits each time), so no row of them is kept and n_experts has no
// limit. Thread 0 writes the picks and normalizes. Every thread of the
// block (any whole warps) calls it; L: a const float*, or a const volatile
// float* for logits other blocks of the launch wrote.
template <typename L>
__device__ __forceinline__ void TopKOfRow(L logits, int n_experts, int k, bool normalize, int32_t* ids, float* w) {
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

}  // namespace octo::cuda::top_k
