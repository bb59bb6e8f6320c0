// LayerNorm on CUDA. Semantics and preconditions: kernels/ops.h; the CPU twin
// is kernels/cpu/layer_norm.cc.
#include <cstddef>

#include "absl/status/status.h"
#include "kernels/cuda/common.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

// --- Kernels -----------------------------------------------------------------

// The sum of `v` over the block in double, returned to every thread (each
// adds the warps' sums in the same order, so all get the same bits).
// warp_sums: kMaxBlockSize / kWarpSize doubles of shared memory. Every
// thread calls it; safe to call twice (it waits before reusing warp_sums).
__device__ __forceinline__ double RowSum(double v, double* warp_sums) {
  v = WarpReduceSum(v);
  __syncthreads();  // a previous call may still be reading warp_sums
  if (threadIdx.x % kWarpSize == 0) warp_sums[threadIdx.x / kWarpSize] = v;
  __syncthreads();  // every warp's sum is written
  double sum = 0.0;
  for (int w = 0; w < static_cast<int>(blockDim.x / kWarpSize); ++w) sum += warp_sums[w];
  return sum;
}

// One block per row. Each thread strides over the row with step blockDim.x:
// it sums its elements, then (with the block's mean) their centred squares,
// then writes the elements it read. The floats summed are the CPU's (x, and
// the float squares of x - mean); summed in double, each exact, the float
// mean and variance are the CPU's but for a rounding tie (ops.h). A thread
// reads x[i] before it writes out[i] for the same i, and no thread reads
// another's elements, so out == x (in place) is safe.
// Launch: gridDim.x == n_rows, blockDim.x a multiple of 32, at most 1024.
__global__ void LayerNormKernel(const float* x,       // (n_rows, dim)
                                const float* weight,  // (dim)
                                const float* bias,    // (dim)
                                float* out,           // (n_rows, dim)
                                int dim, float eps) {
  GridStart();
  __shared__ double warp_sums[kMaxBlockSize / kWarpSize];
  const size_t row_offset = static_cast<size_t>(blockIdx.x) * dim;
  const float* x_row = x + row_offset;
  float* out_row = out + row_offset;

  double sum = 0.0;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) sum += static_cast<double>(x_row[i]);
  const float mean = static_cast<float>(RowSum(sum, warp_sums) / dim);

  double ss = 0.0;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = x_row[i] - mean;
    ss += static_cast<double>(v * v);
  }
  // The CPU version's expressions; without --use_fast_math the division and
  // sqrtf are IEEE-rounded, and --fmad=false keeps each step rounded alone.
  const float variance = static_cast<float>(RowSum(ss, warp_sums) / dim);
  const float scale = 1.0f / sqrtf(variance + eps);

  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = x_row[i] - mean;
    out_row[i] = (v * scale) * weight[i] + bias[i];
  }
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

absl::Status LayerNorm(const float* x, const float* weight, const float* bias, float* out, int n_rows, int dim,
                       float eps, StreamHandle stream) {
  absl::Status args = CheckLayerNormArgs(x, weight, bias, out, n_rows, dim, eps);
  if (!args.ok()) return args;
  // Grid: one block per row. Block: as RmsNorm's, enough whole warps for one
  // element per thread, capped at 1024 threads.
  const int threads = dim >= kMaxBlockSize ? kMaxBlockSize : (dim + kWarpSize - 1) / kWarpSize * kWarpSize;
  OCTO_LAUNCH(LayerNormKernel, n_rows, threads, 0, stream, x, weight, bias, out, dim, eps);
  return absl::OkStatus();
}

}  // namespace octo::cuda
