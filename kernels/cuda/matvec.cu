// MatVec on CUDA: decode-sized batches (n_tokens a few) times a weight matrix
// in any GGUF block type, each weight decoded from its block as it is read
// (kernels/block_decode.h), never stored dequantized. Semantics and
// preconditions: kernels/ops.h.
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/block_decode.h"
#include "kernels/cuda/common.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

constexpr int kTokensPerLaunch = 8;  // accumulators per thread
constexpr int kWarpsPerBlock = 8;

// --- Kernel ------------------------------------------------------------------

// One warp per weight row. Lane l takes elements l, l + 32, l + 64, ...: the
// warp reads x and the row's blocks front to back together, decodes each
// weight once for all n_tokens (<= kTokensPerLaunch), and sums in float.
// Launch: blockDim.x == kWarpsPerBlock * 32, gridDim.x * kWarpsPerBlock >= rows.
template <typename D>
__global__ void MatVecKernel(const uint8_t* w, int64_t rows, int64_t cols, int64_t row_bytes,
                             const float* x,  // (n_tokens, cols)
                             float* out,      // (n_tokens, out_stride), this launch's rows from 0
                             int64_t out_stride, int n_tokens) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // the whole warp leaves together
  const int lane = threadIdx.x % kWarpSize;
  const uint8_t* w_row = w + row * row_bytes;

  float acc[kTokensPerLaunch] = {};
  for (int64_t e = lane; e < cols; e += kWarpSize) {
    const float v = D::Element(w_row + e / D::kElements * D::kBytes, static_cast<int>(e % D::kElements));
#pragma unroll
    for (int t = 0; t < kTokensPerLaunch; ++t) {
      if (t < n_tokens) acc[t] += v * x[t * cols + e];
    }
  }
#pragma unroll
  for (int t = 0; t < kTokensPerLaunch; ++t) {
    const float sum = WarpReduceSum(acc[t]);
    if (lane == 0 && t < n_tokens) out[t * out_stride + row] = sum;
  }
}

absl::Status CheckMatVecArgs(const WeightMatrix& w, const float* x, const float* out, int n_tokens) {
  if (absl::Status null = CheckNotNull("MatVec", {{"w.data", w.data}, {"x", x}, {"out", out}}); !null.ok()) {
    return null;
  }
  const GgmlTypeInfo* info = nullptr;
  for (const GgmlTypeInfo& candidate : AllGgmlTypes()) {
    if (candidate.type == w.type) info = &candidate;
  }
  if (info == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("MatVec: w.type %u is not a weight type", static_cast<uint32_t>(w.type)));
  }
  if (w.rows <= 0 || w.cols <= 0 || w.cols % info->block_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("MatVec: w is %d x %d; %s needs rows > 0 and cols a positive multiple of %u", w.rows, w.cols,
                        info->name, info->block_size));
  }
  if (n_tokens <= 0) return absl::InvalidArgumentError(absl::StrFormat("MatVec: n_tokens is %d", n_tokens));
  return absl::OkStatus();
}

}  // namespace

// --- Launcher ----------------------------------------------------------------

absl::Status MatVec(const WeightMatrix& w, const float* x, float* out, int n_tokens, StreamHandle stream) {
  if (absl::Status args = CheckMatVecArgs(w, x, out, n_tokens); !args.ok()) return args;
  const auto* bytes = static_cast<const uint8_t*>(w.data);
  const unsigned grid = static_cast<unsigned>((w.rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  return block_decode::WithDecoder(w.type, absl::InternalError("MatVec: no decoder"), [&](auto decoder) {
    using D = decltype(decoder);
    const int64_t row_bytes = w.cols / D::kElements * D::kBytes;
    for (int first = 0; first < n_tokens; first += kTokensPerLaunch) {
      const int count = n_tokens - first < kTokensPerLaunch ? n_tokens - first : kTokensPerLaunch;
      OCTO_LAUNCH(MatVecKernel<D>, grid, kWarpsPerBlock * kWarpSize, 0, stream,
          bytes, w.rows, w.cols, row_bytes, x + static_cast<int64_t>(first) * w.cols,
          out + static_cast<int64_t>(first) * w.rows, w.rows, count);
      OCTO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    }
    return absl::OkStatus();
  });
}

}  // namespace octo::cuda
