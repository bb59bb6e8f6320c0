// The gating functions on the device, the CPU's expressions with the
// device's expf: silu(g) * u (kernels/cpu/silu_mul.cc) and sigmoid
// (kernels/cpu/delta_net.cc). One definition for every kernel that applies
// them -- SiluMul's and the gated decode launch (MatMulGlu); SigmoidMul's
// and attention's gated output, the MoE shared expert's gate -- so fused
// launches give the same bits.
#pragma once

#include "kernels/cuda/common.cuh"

namespace octo::cuda {

__device__ __forceinline__ float SiluTimes(float g, float u) {
  const float silu = g / (1.0f + expf(-g));
  return silu * u;
}

__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

}  // namespace octo::cuda
