// silu(g) * u on the device: the CPU's expression (kernels/cpu/silu_mul.cc)
// with the device's expf. One definition for SiluMul's kernels and the
// gated decode launch (MatMulGlu), so the two give the same bits.
#pragma once

#include "kernels/cuda/common.cuh"

namespace octo::cuda {

__device__ __forceinline__ float SiluTimes(float g, float u) {
  const float silu = g / (1.0f + expf(-g));
  return silu * u;
}

}  // namespace octo::cuda
