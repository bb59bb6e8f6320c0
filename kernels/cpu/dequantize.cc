// DequantizeRows and GetRows on the CPU (the embedding lookup). Semantics
// and preconditions: kernels/ops.h; the per-type work is dequantize_row.cc.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/type_kernels.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"
#include "storage/status_macros.h"

namespace octo::cpu {

absl::Status DequantizeRows(const WeightMatrix& w, int64_t first_row, int64_t n_rows, float* out) {
  OCTO_ASSIGN_OR_RETURN(const CheckedWeights checked, CheckWeightMatrix("DequantizeRows", w));
  OCTO_RETURN_IF_ERROR(CheckDequantizeRowsArgs(w, first_row, n_rows, out).status());
  const auto* data = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < n_rows; ++r) {
    checked.kernels->dequantize(data + (first_row + r) * checked.row_bytes, w.cols, out + r * w.cols);
  }
  return absl::OkStatus();
}

absl::Status GetRows(const WeightMatrix& w, const int32_t* ids, int n, float* out) {
  OCTO_ASSIGN_OR_RETURN(const CheckedWeights checked, CheckWeightMatrix("GetRows", w));
  OCTO_RETURN_IF_ERROR(CheckGetRowsArgs(w, ids, n, out).status());
  for (int i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= w.rows) {
      return absl::InvalidArgumentError(absl::StrCat("GetRows: id ", ids[i], " (row ", i, ") is outside w's ", w.rows,
                                                     " rows"));
    }
  }
  const auto* data = static_cast<const uint8_t*>(w.data);
  for (int i = 0; i < n; ++i) checked.kernels->dequantize(data + ids[i] * checked.row_bytes, w.cols, out + i * w.cols);
  return absl::OkStatus();
}

}  // namespace octo::cpu
