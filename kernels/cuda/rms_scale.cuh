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
// The scale from a sum of squares of a row of dim: the CPU version's
// expression; without --use_fast_math both the division and sqrtf are
// IEEE-rounded.
__device__ __forceinline__ float RmsScaleOfSum(double ss, int dim, float eps) {
  const float mean = static_cast<float>(ss / dim);
  return 1.0f / sqrtf(mean + eps);
}

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
  return RmsScaleOfSum(ss, dim, eps);
}

// RmsScaleOf as a block of `threads` threads (whole warps, at most
// kMaxBlockSize) computes it, played by this block of any size: its thread p
// plays threads p, p + blockDim.x, ... below `threads`, played_sum(t) being
// played thread t's own sum, and its warp reduces each played warp as that
// warp's shuffle tree would; the played warps' sums are added in order. So
// the scale is RmsNormKernel's, bit for bit, in a block that is not one row's
// (a decode MatMul's last block: MatMulAddRmsNorm, fused.h). Every thread of
// the block calls it (barriers inside); may be called again.
template <typename PlayedSum>
__device__ __forceinline__ float PlayedRmsScaleOf(int threads, PlayedSum played_sum, int dim, float eps) {
  __shared__ double played_warp_sums[kMaxBlockSize / kWarpSize];
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  __syncthreads();  // a previous call may still be reading played_warp_sums
  // first: the first thread of a played warp (the same for the whole warp).
  for (int first = static_cast<int>(threadIdx.x) - lane; first < threads; first += blockDim.x) {
    const double ss = WarpReduceSum(played_sum(first + lane));
    if (lane == 0) played_warp_sums[first / kWarpSize] = ss;
  }
  __syncthreads();  // every played warp's sum is written
  double ss = 0.0;
  for (int w = 0; w < threads / kWarpSize; ++w) ss += played_warp_sums[w];
  return RmsScaleOfSum(ss, dim, eps);
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
__host__ __device__ inline int RowThreads(int dim) {
  return dim >= kMaxBlockSize ? kMaxBlockSize : (dim + kWarpSize - 1) / kWarpSize * kWarpSize;
}

}  // namespace octo::cuda
