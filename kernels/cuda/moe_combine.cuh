// MoeCombine's value of one output element (ops.h): the weighted sum of a
// row's k expert outputs in choice order, plus the shared expert's output
// times its gate. One expression for MoeCombineKernel, for the norm that
// adds the combined rows into the residual stream in its own launch
// (rmsnorm.cu, fused.h's CombineAddRmsNorm) and for the down experts' launch
// that does that norm in its last block (matmul_decode.cu,
// MatMulExpertsCombineNorm), so the three give the same bits.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gates.cuh"
#include "kernels/ops.h"

namespace octo::cuda {

// Element i of row r of p's combined rows (p.out is not read), the expert
// and shared rows read through expert_out and shared (p's, or volatile
// views of them for rows other blocks of the launch stored).
template <typename Rows>
__device__ __forceinline__ float CombinedValueOf(const MoeCombineParams& p, Rows expert_out, Rows shared, int64_t r,
                                                 int64_t i) {
  float acc = 0.0f;
  for (int j = 0; j < p.k; ++j) acc = acc + expert_out[(r * p.k + j) * p.dim + i] * p.weights[r * p.k + j];
  if (p.shared != nullptr) {
    const float gate = p.shared_gate_logits != nullptr ? Sigmoid(p.shared_gate_logits[r]) : 1.0f;
    acc = acc + shared[r * p.dim + i] * gate;
  }
  return acc;
}
__device__ __forceinline__ float CombinedValue(const MoeCombineParams& p, int64_t r, int64_t i) {
  return CombinedValueOf(p, p.expert_out, p.shared, r, i);
}

}  // namespace octo::cuda
