// The grid of Octo's element-wise CUDA ops (Add, AddBias, SiluMul, KvAppend,
// DequantizeRows): one-dimensional blocks of kElementwiseThreads, one element
// per thread up to kMaxElementwiseBlocks blocks, past which every thread
// strides over the elements, gridDim.x * blockDim.x apart:
//
//   for (int64_t i = GridStrideBegin(); i < n; i += GridStrideStep()) ...
//
// 256 blocks of 256 threads (65536) keep an H100's 132 SMs busy on these
// memory-bound loops, and keep a large call cheap in the host executor, which
// pays per GPU thread.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace octo::cuda {

inline constexpr int kElementwiseThreads = 256;
inline constexpr int64_t kMaxElementwiseBlocks = 256;

// Blocks for n > 0 elements.
inline int ElementwiseBlocks(int64_t n) {
  const int64_t blocks = (n + kElementwiseThreads - 1) / kElementwiseThreads;
  return static_cast<int>(blocks < kMaxElementwiseBlocks ? blocks : kMaxElementwiseBlocks);
}

// This thread's first element and the step between its elements.
__device__ __forceinline__ int64_t GridStrideBegin() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridStrideStep() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

}  // namespace octo::cuda
