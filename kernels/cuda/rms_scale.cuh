// The RMSNorm scale of one row, 1 / sqrt(mean(x^2) + eps), as a block
// computes it: RmsNorm's kernel (rmsnorm.cu) and RoPE's fused head norms
// (rope.cu) share it, so a row launched with the same block size gets the
// same bits from either.
#pragma once

#include "kernels/cuda/common.cuh"

namespace octo::cuda {

// The squares (float products, as on the CPU) summed in double: each is
// exact in double and the sum of up to 2^20 of them errs by far less than
// half a float ulp of the mean, so the mean rounded to float is the CPU's
// (which sums in index order) but for a tie at a rounding boundary.
// RmsScaleOf takes each thread's own sum, of the squares of row[t],
// row[t + blockDim.x], ... in that order (thread t), and adds the block's
// in a fixed order: the warps' shuffle trees, then the warps in order.
// Every thread of the block calls it (barriers inside); blockDim.x a
// multiple of 32. May be called again in the same kernel.
__device__ __forceinline__ float RmsScaleOf(double ss, int dim, float eps) {
  __shared__ double warp_sums[kMaxBlockSize / kWarpSize];
  ss = WarpReduceSum(ss);
  if (threadIdx.x % kWarpSize == 0) warp_sums[threadIdx.x / kWarpSize] = ss;
  __syncthreads();  // every warp's sum is written
  ss = 0.0;
  for (int w = 0; w < static_cast<int>(blockDim.x / kWarpSize); ++w) ss += warp_sums[w];
  __syncthreads();  // every thread has read them (a next call rewrites them)
  // The CPU version's expression; without --use_fast_math both the division
  // and sqrtf are IEEE-rounded.
  const float mean = static_cast<float>(ss / dim);
  return 1.0f / sqrtf(mean + eps);
}

// The square of one element as RmsScaleOf's sums take it.
__device__ __forceinline__ double SquareOf(float x) { return static_cast<double>(x * x); }

// RmsScaleOf of a row in global (or shared) memory, thread t reading row[t],
// row[t + blockDim.x], ...
__device__ __forceinline__ float RmsScale(const float* row, int dim, float eps) {
  double ss = 0.0;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += SquareOf(row[i]);
  return RmsScaleOf(ss, dim, eps);
}

// Threads of a block that norms a row of dim: whole warps, one element each,
// at most kMaxBlockSize.
inline int RowThreads(int dim) {
  return dim >= kMaxBlockSize ? kMaxBlockSize : (dim + kWarpSize - 1) / kWarpSize * kWarpSize;
}

}  // namespace octo::cuda
