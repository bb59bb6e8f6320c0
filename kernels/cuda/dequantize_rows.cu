// DequantizeRows and GetRows on CUDA (the embedding lookup): the same values as the CPU
// twin (kernels/cpu/dequantize.cc), bit for bit, because both decode with
// the block decoders of kernels/block_decode.h, built without contraction.
// Semantics and preconditions: kernels/ops.h.
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/block_decode.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

// --- Kernels -----------------------------------------------------------------

// out[r][c] = element c of row first_row + r of w, decoded from its block by
// Decoder, one thread per element. Neighbouring threads write neighbouring
// floats of a row and read the same block.
//   rows: w's rows from first_row on (the launcher offsets w.data).
// Launch: one-dimensional, any size (grid-stride).
template <typename Decoder>
__global__ void DequantizeRowsKernel(const uint8_t* rows,  // (n_rows, row_bytes) blocks of Decoder's type
                                     float* out,           // (n_rows, cols)
                                     int64_t n_rows, int64_t cols, int64_t row_bytes) {
  GridStart();
  const int64_t n = n_rows * cols;
  for (int64_t i = GridStrideBegin(); i < n; i += GridStrideStep()) {
    const int64_t r = i / cols;
    const int64_t c = i - r * cols;
    const uint8_t* block = rows + r * row_bytes + c / Decoder::kElements * Decoder::kBytes;
    out[i] = Decoder::Element(block, static_cast<int>(c % Decoder::kElements));
  }
}

// out[r][c] = element c of row ids[r] of w (zeros for an id outside
// [0, n_w_rows)), one thread per element, as DequantizeRowsKernel.
template <typename Decoder>
__global__ void GetRowsKernel(const uint8_t* w,      // (n_w_rows, row_bytes) blocks of Decoder's type
                              const int32_t* ids,    // (n)
                              float* out,            // (n, cols)
                              int64_t n, int64_t cols, int64_t row_bytes, int64_t n_w_rows) {
  GridStart();
  for (int64_t i = GridStrideBegin(); i < n * cols; i += GridStrideStep()) {
    const int64_t r = i / cols;
    const int64_t c = i - r * cols;
    const int64_t id = ids[r];
    if (id < 0 || id >= n_w_rows) {
      out[i] = 0.0f;
      continue;
    }
    const uint8_t* block = w + id * row_bytes + c / Decoder::kElements * Decoder::kBytes;
    out[i] = Decoder::Element(block, static_cast<int>(c % Decoder::kElements));
  }
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

absl::Status DequantizeRows(const WeightMatrix& w, int64_t first_row, int64_t n_rows, float* out,
                            StreamHandle stream) {
  const absl::StatusOr<int64_t> row_bytes = CheckDequantizeRowsArgs(w, first_row, n_rows, out);
  if (!row_bytes.ok()) return row_bytes.status();

  const uint8_t* rows = static_cast<const uint8_t*>(w.data) + first_row * *row_bytes;
  const int blocks = ElementwiseBlocks(n_rows * w.cols);
  // CheckWeightShape accepted the type, so WithDecoder finds it; the
  // fallback only keeps the switch total.
  return block_decode::WithDecoder(
      w.type, absl::InternalError("DequantizeRows: no decoder for a checked type"), [&](auto decoder) {
        using Decoder = decltype(decoder);
        OCTO_LAUNCH(DequantizeRowsKernel<Decoder>, blocks, kElementwiseThreads, 0, stream, rows, out, n_rows,
                    w.cols, *row_bytes);
        return absl::OkStatus();
      });
}

absl::Status GetRows(const WeightMatrix& w, const int32_t* ids, int n, float* out, StreamHandle stream) {
  const absl::StatusOr<int64_t> row_bytes = CheckGetRowsArgs(w, ids, n, out);
  if (!row_bytes.ok()) return row_bytes.status();
  const int blocks = ElementwiseBlocks(int64_t{n} * w.cols);
  return block_decode::WithDecoder(
      w.type, absl::InternalError("GetRows: no decoder for a checked type"), [&](auto decoder) {
        using Decoder = decltype(decoder);
        OCTO_LAUNCH(GetRowsKernel<Decoder>, blocks, kElementwiseThreads, 0, stream, static_cast<const uint8_t*>(w.data),
                    ids, out, int64_t{n}, w.cols, *row_bytes, w.rows);
        return absl::OkStatus();
      });
}

}  // namespace octo::cuda
