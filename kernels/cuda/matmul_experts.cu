// cuda::MatMulExperts (kernels/ops.h): every (token, choice) through the
// decode path of cuda::MatMul with its expert's matrix picked on the device,
// so each gets the bits cuda::MatMul's decode path gives it alone.
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/matmul_paths.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {

size_t MatMulExpertsScratchBytes(const WeightMatrix& w, const MatMulExpertsParams& p) {
  const int64_t n_x = p.x_per_choice ? int64_t{p.n_tokens} * p.k : p.n_tokens;
  return matmul::DecodeScratchBytes(w.type, w.cols, n_x);
}

absl::Status MatMulExperts(const WeightMatrix& w, const int32_t* expert_ids, const float* x, float* out,
                           const MatMulExpertsParams& p, const Exec& exec) {
  absl::StatusOr<ExpertLayout> layout = CheckMatMulExpertsArgs(w, expert_ids, x, out, p);
  if (!layout.ok()) return layout.status();
  if (absl::Status aligned = matmul::CheckWeightAlignment("MatMulExperts", w, layout->expert_bytes); !aligned.ok()) {
    return aligned;
  }
  if (w.cols > INT32_MAX || int64_t{p.n_tokens} * p.k > INT32_MAX) {
    return absl::InvalidArgumentError("MatMulExperts: more than 2^31 columns or choices");
  }
  const size_t scratch = MatMulExpertsScratchBytes(w, p);
  if (exec.scratch_bytes < scratch || (scratch > 0 && exec.scratch == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("MatMulExperts: exec.scratch holds %d bytes, this call needs %d (MatMulExpertsScratchBytes)",
                        exec.scratch_bytes, scratch));
  }
  const int64_t rows = w.rows / p.n_experts;
  return matmul::DecodeExperts(w, rows, layout->row_bytes, layout->expert_bytes, expert_ids, x, out, p, exec);
}

}  // namespace octo::cuda
