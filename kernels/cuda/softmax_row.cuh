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
// CPU. The sum's order depends on the block size, so both ops reduce as a
// block of SoftmaxThreads(n) threads does -- TopKExperts also in a block of
// another size (the router MatMul's last block: PlayedBlockReduce).
#pragma once

#include <cmath>

#include "kernels/cuda/common.cuh"

namespace octo::cuda {

// Threads of a block that holds a row of n > 0 values: enough whole warps to
// give each thread one value, at most kMaxBlockSize.
__host__ __device__ inline int SoftmaxThreads(int n) {
  return n >= kMaxBlockSize ? kMaxBlockSize : (n + kWarpSize - 1) / kWarpSize * kWarpSize;
}

// The max (kMax) or the sum of value(t) over the threads t < threads of a
// block of `threads` threads (whole warps, at most kMaxBlockSize), as such a
// block reduces them: each warp's butterfly (fmaxf, or float adds), then
// the warps' results through one more butterfly. This block, of any
// blockDim.x (whole warps), plays that one: its thread p plays threads p, p
// + blockDim.x, ... below `threads`, its warp reducing each played warp as
// that warp would, so the float is the same whatever blockDim.x. Returned
// to every thread; every thread calls it (it holds barriers), and may call
// it again.
template <bool kMax, typename Value>
__device__ __forceinline__ float PlayedBlockReduce(int threads, Value value) {
  __shared__ float warp_results[kMaxBlockSize / kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
  auto warp_reduce = [](float v) {
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, v, offset);
      v = kMax ? fmaxf(v, other) : v + other;
    }
    return v;
  };
  __syncthreads();  // a previous call may still be reading warp_results
  // first: the first thread of a played warp (the same for a whole warp).
  for (int first = static_cast<int>(threadIdx.x) - lane; first < threads; first += blockDim.x) {
    const float v = warp_reduce(value(first + lane));
    if (lane == 0) warp_results[first / kWarpSize] = v;
  }
  __syncthreads();  // every played warp's result is written
  return warp_reduce(lane < threads / kWarpSize ? warp_results[lane] : (kMax ? -INFINITY : 0.0f));
}

// What turns a row's x[i] into p_i: its max and the reciprocal of its sum.
struct SoftmaxScale {
  float max;
  float inv_sum;
};

// The row's SoftmaxScale as a block of SoftmaxThreads(n) threads computes
// it (thread t taking x[t], x[t + threads], ... in order), by this block of
// any size (PlayedBlockReduce), returned to every thread. Every thread of
// the block calls it (it holds barriers). X: a const float* or, for a row
// other blocks of the launch wrote, a const volatile float*.
template <typename X>
__device__ __forceinline__ SoftmaxScale BlockSoftmaxScale(X x, int n) {
  const int threads = SoftmaxThreads(n);
  const float max = PlayedBlockReduce<true>(threads, [&](int t) {
    float m = -INFINITY;
    for (int i = t; i < n; i += threads) m = fmaxf(m, x[i]);
    return m;
  });
  const float sum = PlayedBlockReduce<false>(threads, [&](int t) {
    float s = 0.0f;
    for (int i = t; i < n; i += threads) s += expf(x[i] - max);
    return s;
  });
  return SoftmaxScale{max, 1.0f / sum};
}

// p_i of a value x_i of the row.
__device__ __forceinline__ float SoftmaxProb(float x_i, const SoftmaxScale& scale) {
  return expf(x_i - scale.max) * scale.inv_sum;
}

}  // namespace octo::cuda
