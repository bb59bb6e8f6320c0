// Row softmax on CUDA. Semantics and preconditions: kernels/ops.h; the
// numerics are kernels/cuda/softmax_row.cuh's; the CPU twin is
// kernels/cpu/softmax.cc.
#include <cstddef>

#include "absl/status/status.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/softmax_row.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

// --- Kernels -----------------------------------------------------------------

// One block per row, in place. Every thread reads and writes only its own
// strided elements, and writes them after the block's last reduction, so
// no thread reads a value another has overwritten.
// Launch: gridDim.x == n_rows, blockDim.x == SoftmaxThreads(n).
__global__ void SoftmaxKernel(float* x,  // (n_rows, n)
                              int n) {
  GridStart();
  float* row = x + static_cast<size_t>(blockIdx.x) * n;
  const SoftmaxScale scale = BlockSoftmaxScale(row, n);
  for (int i = threadIdx.x; i < n; i += blockDim.x) row[i] = SoftmaxProb(row[i], scale);
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

absl::Status Softmax(float* x, int n_rows, int n, StreamHandle stream) {
  absl::Status args = CheckSoftmaxArgs(x, n_rows, n);
  if (!args.ok()) return args;
  // Grid: one block per row (n_rows is an int, within gridDim.x's 2^31 - 1).
  OCTO_LAUNCH(SoftmaxKernel, n_rows, SoftmaxThreads(n), 0, stream, x, n);
  return absl::OkStatus();
}

}  // namespace octo::cuda
