// MoeCombine on CUDA: one thread per output element, summing in the CPU
// twin's order (kernels/cpu/moe_combine.cc), so the bits match but for the
// device's expf in the shared expert's gate. Semantics: kernels/ops.h.
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

// --- Kernels -----------------------------------------------------------------

// out[r][i] = sum_j expert_out[r][j][i] * weights[r][j] (+ shared[r][i] * gate_r).
// Launch: one-dimensional, any size (grid-stride over n_rows * dim).
__global__ void MoeCombineKernel(const float* expert_out,          // (n_rows, k, dim)
                                 const float* weights,             // (n_rows, k)
                                 const float* shared,              // (n_rows, dim) or null
                                 const float* shared_gate_logits,  // (n_rows) or null
                                 float* out,                       // (n_rows, dim)
                                 int64_t n, int k, int dim) {
  GridStart();
  for (int64_t e = GridStrideBegin(); e < n; e += GridStrideStep()) {
    const int64_t r = e / dim;
    const int64_t i = e % dim;
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) acc = acc + expert_out[(r * k + j) * dim + i] * weights[r * k + j];
    if (shared != nullptr) {
      const float gate = shared_gate_logits != nullptr ? 1.0f / (1.0f + expf(-shared_gate_logits[r])) : 1.0f;
      acc = acc + shared[e] * gate;
    }
    out[e] = acc;
  }
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

absl::Status MoeCombine(const MoeCombineParams& p, StreamHandle stream) {
  absl::Status args = CheckMoeCombineArgs(p);
  if (!args.ok()) return args;
  const int64_t n = static_cast<int64_t>(p.n_rows) * p.dim;
  OCTO_LAUNCH(MoeCombineKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, p.expert_out, p.weights,
              p.shared, p.shared_gate_logits, p.out, n, p.k, p.dim);
  return absl::OkStatus();
}

}  // namespace octo::cuda
