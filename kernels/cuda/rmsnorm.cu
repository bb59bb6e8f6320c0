// RMSNorm on CUDA. Semantics and preconditions: kernels/ops.h; the CPU twin
// is kernels/cpu/rmsnorm.cc.
#include <cstddef>

#include "absl/status/status.h"
#include "kernels/cuda/common.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

// --- Kernels -----------------------------------------------------------------

// One block per row. Each thread strides over the row with step blockDim.x,
// squares and sums its elements, the block sums the partial sums, and each
// thread then writes the elements it read. A thread reads x[i] before it
// writes out[i] for the same i, so out == x (in place) is safe.
// With kAdd, x is the residual stream and delta is added to it first
// (x[i] = x[i] + delta[i], stored, as AddKernel computes it) by the thread
// that then squares, scales and writes element i: the same bits as the two
// launches, whether or not out is delta.
// Launch: gridDim.x == n_rows, blockDim.x a multiple of 32, at most 1024.
template <bool kAdd>
__global__ void RmsNormKernel(float* x,             // (n_rows, dim); written only with kAdd
                              const float* delta,   // (n_rows, dim) with kAdd, else null
                              const float* weight,  // (dim)
                              float* out,           // (n_rows, dim)
                              int dim, float eps) {
  const size_t row_offset = static_cast<size_t>(blockIdx.x) * dim;
  float* x_row = x + row_offset;
  float* out_row = out + row_offset;
  if constexpr (kAdd) {
    const float* delta_row = delta + row_offset;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) x_row[i] = x_row[i] + delta_row[i];
  }

  // The squares (float products, as on the CPU) summed in double: each is
  // exact in double and the sum of up to 2^20 of them errs by far less than
  // half a float ulp of the mean, so the mean rounded to float is the CPU's
  // (which sums in index order) but for a tie at a rounding boundary.
  __shared__ double warp_sums[kMaxBlockSize / kWarpSize];
  double ss = 0.0;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += static_cast<double>(x_row[i] * x_row[i]);
  ss = WarpReduceSum(ss);
  if (threadIdx.x % kWarpSize == 0) warp_sums[threadIdx.x / kWarpSize] = ss;
  __syncthreads();  // every warp's sum is written
  ss = 0.0;
  for (int w = 0; w < static_cast<int>(blockDim.x / kWarpSize); ++w) ss += warp_sums[w];
  // The CPU version's expression; without --use_fast_math both the division
  // and sqrtf are IEEE-rounded.
  const float mean = static_cast<float>(ss / dim);
  const float scale = 1.0f / sqrtf(mean + eps);

  for (int i = threadIdx.x; i < dim; i += blockDim.x) out_row[i] = x_row[i] * scale * weight[i];
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

namespace {

// Grid: one block per row (n_rows is an int, within gridDim.x's 2^31 - 1).
// Block: enough whole warps to give each thread one element, capped at
// 1024 threads; longer rows (dim 4096, 8192) give each thread dim / 1024.
int RowThreads(int dim) { return dim >= kMaxBlockSize ? kMaxBlockSize : (dim + kWarpSize - 1) / kWarpSize * kWarpSize; }

}  // namespace

absl::Status RmsNorm(const float* x, const float* weight, float* out, int n_rows, int dim,
                     float eps, StreamHandle stream) {
  absl::Status args = CheckRmsNormArgs(x, weight, out, n_rows, dim, eps);
  if (!args.ok()) return args;
  // The kernel writes x only with kAdd.
  OCTO_LAUNCH(RmsNormKernel<false>, n_rows, RowThreads(dim), 0, stream, const_cast<float*>(x), nullptr, weight, out,
              dim, eps);
  return absl::OkStatus();
}

absl::Status AddRmsNorm(float* x, const float* delta, const float* weight, float* out, int n_rows, int dim,
                        float eps, StreamHandle stream) {
  absl::Status args = CheckRmsNormArgs(x, weight, out, n_rows, dim, eps);
  if (!args.ok()) return args;
  if (delta == nullptr) return absl::InvalidArgumentError("AddRmsNorm: delta is null");
  const int64_t bytes = int64_t{n_rows} * dim * 4;
  if (Overlaps(x, bytes, delta, bytes) || Overlaps(x, bytes, out, bytes)) {
    return absl::InvalidArgumentError("AddRmsNorm: x overlaps delta or out");
  }
  OCTO_LAUNCH(RmsNormKernel<true>, n_rows, RowThreads(dim), 0, stream, x, delta, weight, out, dim, eps);
  return absl::OkStatus();
}

}  // namespace octo::cuda
