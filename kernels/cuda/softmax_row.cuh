// The one-row softmax shared by cuda::Softmax and cuda::TopKExperts, so the
// two round exactly alike (kernels/cpu/softmax_row.h is the CPU's). Internal
// to kernels/cuda.
//
// One block holds one row of n values:
//   max  = the largest x[i]                         (fmaxf, skips NaN)
//   e_i  = expf(x[i] - max)                         (the device's expf)
//   sum  = sum_i e_i                                (float: each thread's
//          strided elements in order, then BlockReduceSum's tree)
//   p_i  = e_i * (1.0f / sum)                       (times the reciprocal)
// A row holding NaN or +inf, or only -inf, has a NaN sum (an e_i is
// NaN: NaN - max, inf - inf or -inf - -inf), so every p_i is NaN, as on the
// CPU. The sum's order depends on blockDim.x, so both ops take their block
// size from SoftmaxThreads(n).
#pragma once

#include <cmath>

#include "kernels/cuda/common.cuh"

namespace octo::cuda {

// Threads of a block that holds a row of n > 0 values: enough whole warps to
// give each thread one value, at most kMaxBlockSize.
inline int SoftmaxThreads(int n) {
  return n >= kMaxBlockSize ? kMaxBlockSize : (n + kWarpSize - 1) / kWarpSize * kWarpSize;
}

// The largest `v` of a one-dimensional block (fmaxf: a NaN is passed over
// unless every value is NaN), returned to every thread. Requirements as
// BlockReduceSum's.
__device__ __forceinline__ float BlockReduceMax(float v) {
  __shared__ float warp_maxes[kMaxBlockSize / kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int n_warps = blockDim.x / kWarpSize;

#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  __syncthreads();  // a previous call may still be reading warp_maxes
  if (lane == 0) warp_maxes[warp] = v;
  __syncthreads();  // every warp's max is written
  v = lane < n_warps ? warp_maxes[lane] : -INFINITY;
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// What turns a row's x[i] into p_i: its max and the reciprocal of its sum.
struct SoftmaxScale {
  float max;
  float inv_sum;
};

// The row's SoftmaxScale, returned to every thread. Every thread of the block
// calls it (it holds barriers); blockDim.x is SoftmaxThreads(n).
__device__ __forceinline__ SoftmaxScale BlockSoftmaxScale(const float* x, int n) {
  float max = -INFINITY;
  for (int i = threadIdx.x; i < n; i += blockDim.x) max = fmaxf(max, x[i]);
  max = BlockReduceMax(max);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) sum += expf(x[i] - max);
  sum = BlockReduceSum(sum);
  return SoftmaxScale{max, 1.0f / sum};
}

// p_i of a value x_i of the row.
__device__ __forceinline__ float SoftmaxProb(float x_i, const SoftmaxScale& scale) {
  return expf(x_i - scale.max) * scale.inv_sum;
}

}  // namespace octo::cuda
