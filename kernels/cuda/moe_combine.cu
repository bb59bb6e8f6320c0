// MoeCombine on CUDA: one thread per output element, summing in the CPU
// twin's order (kernels/cpu/moe_combine.cc; moe_combine.cuh's CombinedValue),
// so the bits match but for the device's expf in the shared expert's gate.
// Semantics: kernels/ops.h.
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/moe_combine.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

// --- Kernels -----------------------------------------------------------------

// out[r][i] = sum_j expert_out[r][j][i] * weights[r][j] (+ shared[r][i] * gate_r):
// CombinedValue.
// Launch: one-dimensional, any size (grid-stride over n_rows * dim).
__global__ void MoeCombineKernel(const MoeCombineParams p, int64_t n) {
  GridStart();
  for (int64_t e = GridStrideBegin(); e < n; e += GridStrideStep()) p.out[e] = CombinedValue(p, e / p.dim, e % p.dim);
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

absl::Status MoeCombine(const MoeCombineParams& p, StreamHandle stream) {
  absl::Status args = CheckMoeCombineArgs(p);
  if (!args.ok()) return args;
  const int64_t n = static_cast<int64_t>(p.n_rows) * p.dim;
  OCTO_LAUNCH(MoeCombineKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, p, n);
  return absl::OkStatus();
}

}  // namespace octo::cuda
