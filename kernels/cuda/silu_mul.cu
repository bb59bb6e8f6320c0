// SiLU-gated product on CUDA. Semantics and preconditions: kernels/ops.h;
// the CPU twin is kernels/cpu/silu_mul.cc.
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

// --- Kernels -----------------------------------------------------------------

// out[i] = silu(gate[i]) * up[i], the CPU's expression with the device's
// expf. Each element is read and written by one thread, the reads first, so
// out may be gate or up.
// Launch: one-dimensional, any size (grid-stride).
__global__ void SiluMulKernel(const float* gate,  // (n)
                              const float* up,    // (n)
                              float* out,         // (n)
                              int64_t n) {
  for (int64_t i = GridStrideBegin(); i < n; i += GridStrideStep()) {
    const float g = gate[i];
    const float silu = g / (1.0f + expf(-g));
    out[i] = silu * up[i];
  }
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

absl::Status SiluMul(const float* gate, const float* up, float* out, int64_t n, StreamHandle stream) {
  absl::Status args = CheckSiluMulArgs(gate, up, out, n);
  if (!args.ok()) return args;
  OCTO_LAUNCH(SiluMulKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, gate, up, out, n);
  return absl::OkStatus();
}

}  // namespace octo::cuda
