// Add and AddBias on CUDA: one float addition per element, the same bits as
// the CPU twin (kernels/cpu/add.cc). Semantics and preconditions:
// kernels/ops.h.
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

// --- Kernels -----------------------------------------------------------------

// out[i] = a[i] + b[i]. Each element is read and written by one thread, the
// reads first, so out may be a or b.
// Launch: one-dimensional, any size (grid-stride).
__global__ void AddKernel(const float* a,  // (n)
                          const float* b,  // (n)
                          float* out,      // (n)
                          int64_t n) {
  GridStart();
  for (int64_t i = GridStrideBegin(); i < n; i += GridStrideStep()) out[i] = a[i] + b[i];
}

// x[r][c] += bias[c], over the n_rows * width elements of x taken flat.
// Launch: one-dimensional, any size (grid-stride).
__global__ void AddBiasKernel(float* x,           // (n_rows, width)
                              const float* bias,  // (width)
                              int64_t n, int width) {
  GridStart();
  for (int64_t i = GridStrideBegin(); i < n; i += GridStrideStep()) x[i] += bias[i % width];
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

absl::Status Add(const float* a, const float* b, float* out, int64_t n, StreamHandle stream) {
  absl::Status args = CheckAddArgs(a, b, out, n);
  if (!args.ok()) return args;
  OCTO_LAUNCH(AddKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, a, b, out, n);
  return absl::OkStatus();
}

absl::Status AddBias(float* x, const float* bias, int n_rows, int width, StreamHandle stream) {
  absl::Status args = CheckAddBiasArgs(x, bias, n_rows, width);
  if (!args.ok()) return args;
  const int64_t n = static_cast<int64_t>(n_rows) * width;
  OCTO_LAUNCH(AddBiasKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, x, bias, n, width);
  return absl::OkStatus();
}

}  // namespace octo::cuda
