// GELU (tanh approximation) on CUDA. Semantics and preconditions:
// kernels/ops.h; the CPU twin is kernels/cpu/gelu.cc.
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

// --- Kernels -----------------------------------------------------------------

// out[i] = gelu(x[i]), the CPU's expression: x rounded to fp16, the float
// formula with the device's tanhf, the result rounded to fp16. Each element
// is read and written by one thread, the read first, so out may be x.
// Launch: one-dimensional, any size (grid-stride).
__global__ void GeluKernel(const float* x,  // (n)
                           float* out,      // (n)
                           int64_t n) {
  GridStart();
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kGeluCoefA = 0.044715f;
  for (int64_t i = GridStrideBegin(); i < n; i += GridStrideStep()) {
    const float xi = x[i];
    if (xi <= -10.0f) {
      out[i] = 0.0f;
    } else if (xi >= 10.0f) {
      out[i] = xi;
    } else {
      const float h = ToFloat(FromFloat<__half>(xi));
      const float g = 0.5f * h * (1.0f + tanhf(kSqrt2OverPi * h * (1.0f + kGeluCoefA * h * h)));
      out[i] = ToFloat(FromFloat<__half>(g));
    }
  }
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

absl::Status Gelu(const float* x, float* out, int64_t n, StreamHandle stream) {
  absl::Status args = CheckGeluArgs(x, out, n);
  if (!args.ok()) return args;
  OCTO_LAUNCH(GeluKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, x, out, n);
  return absl::OkStatus();
}

}  // namespace octo::cuda
