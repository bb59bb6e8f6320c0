// cuda::MatMulExperts (kernels/ops.h): every (token, choice) through the
// decode path of cuda::MatMul with its expert's matrix picked on the device,
// so each gets the bits cuda::MatMul's decode path gives it alone; and
// fused.h's MatMulExpertsGroup, several such stacks in one launch.
#include <cstdint>
#include <optional>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/fused.h"
#include "kernels/cuda/matmul_paths.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {

size_t MatMulExpertsScratchBytes(const WeightMatrix& w, const MatMulExpertsParams& p) {
  const int64_t n_x = p.x_per_choice ? int64_t{p.n_tokens} * p.k : p.n_tokens;
  return matmul::DecodeScratchBytes(w.type, w.cols, n_x);
}

namespace {

// MatMulExperts's checks of w and out; w's layout when they hold.
absl::StatusOr<ExpertLayout> CheckExperts(const WeightMatrix& w, const int32_t* expert_ids, const float* x,
                                          const float* out, const MatMulExpertsParams& p, const Exec& exec) {
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
  return layout;
}

}  // namespace

absl::Status MatMulExperts(const WeightMatrix& w, const int32_t* expert_ids, const float* x, float* out,
                           const MatMulExpertsParams& p, const Exec& exec) {
  absl::StatusOr<ExpertLayout> layout = CheckExperts(w, expert_ids, x, out, p, exec);
  if (!layout.ok()) return layout.status();
  return matmul::DecodeExperts({&w, 1}, w.rows / p.n_experts, layout->row_bytes, layout->expert_bytes, expert_ids, x,
                               {&out, 1}, p, exec, nullptr);
}

std::optional<ActQ8Rule> ExpertsRounding(const WeightMatrix& w) {
  if (matmul::IsFloatWeight(w.type)) return std::nullopt;
  return ActQ8RuleFor(w.type);
}

absl::Status MatMulExpertsGroup(std::span<const WeightMatrix> ws, const int32_t* expert_ids, const float* x,
                                std::span<float* const> outs, const MatMulExpertsParams& p, const Exec& exec,
                                const ActQ8Out* rounded) {
  if (ws.empty() || ws.size() > kMaxMatMulGroup || ws.size() != outs.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMulExpertsGroup: %d matrices and %d outputs (1 to %d of each)", ws.size(), outs.size(), kMaxMatMulGroup));
  }
  ExpertLayout first;
  for (size_t i = 0; i < ws.size(); ++i) {
    absl::StatusOr<ExpertLayout> layout = CheckExperts(ws[i], expert_ids, x, outs[i], p, exec);
    if (!layout.ok()) return layout.status();
    if (i == 0) first = *layout;
    if (ws[i].type != ws[0].type || ws[i].rows != ws[0].rows || ws[i].cols != ws[0].cols ||
        layout->expert_bytes != first.expert_bytes) {
      return absl::InvalidArgumentError(
          "MatMulExpertsGroup: the matrices differ in type, shape or expert stride (one launch reads them alike)");
    }
  }
  if (rounded != nullptr && (ExpertsRounding(ws[0]) != rounded->rule || rounded->q == nullptr || rounded->d == nullptr)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMulExpertsGroup: %s weights do not read activations rounded by the rule given", GgmlTypeName(ws[0].type)));
  }
  const matmul::ActQ8View view{rounded != nullptr ? rounded->q : nullptr, rounded != nullptr ? rounded->d : nullptr};
  return matmul::DecodeExperts(ws, ws[0].rows / p.n_experts, first.row_bytes, first.expert_bytes, expert_ids, x, outs,
                               p, exec, rounded != nullptr ? &view : nullptr);
}

absl::Status MatMulExpertsGlu(const WeightMatrix& gate, const WeightMatrix& up, const int32_t* expert_ids,
                              const float* x, float* out, const MatMulExpertsParams& p, const Exec& exec,
                              const ActQ8Out* round_out, const ActQ8Out* rounded) {
  absl::StatusOr<ExpertLayout> layout = CheckExperts(gate, expert_ids, x, out, p, exec);
  if (!layout.ok()) return layout.status();
  absl::StatusOr<ExpertLayout> up_layout = CheckExperts(up, expert_ids, x, out, p, exec);
  if (!up_layout.ok()) return up_layout.status();
  if (up.type != gate.type || up.rows != gate.rows || up.cols != gate.cols ||
      up_layout->expert_bytes != layout->expert_bytes || matmul::IsFloatWeight(gate.type)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMulExpertsGlu: gate (%s, %d x %d) and up (%s, %d x %d) must be quantized stacks of one type, shape and "
        "expert stride",
        GgmlTypeName(gate.type), gate.rows, gate.cols, GgmlTypeName(up.type), up.rows, up.cols));
  }
  const int64_t rows = gate.rows / p.n_experts;
  if (round_out != nullptr) {
    if (absl::Status s = matmul::CheckGluRounding("MatMulExpertsGlu", gate, rows, *round_out); !s.ok()) return s;
  }
  if (rounded != nullptr && (ExpertsRounding(gate) != rounded->rule || rounded->q == nullptr || rounded->d == nullptr)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMulExpertsGlu: %s weights do not read activations rounded by the rule given", GgmlTypeName(gate.type)));
  }
  const matmul::ActQ8View view{rounded != nullptr ? rounded->q : nullptr, rounded != nullptr ? rounded->d : nullptr};
  return matmul::DecodeExpertsGlu(gate, up, rows, layout->row_bytes, layout->expert_bytes, expert_ids, x, out, p,
                                  exec, round_out, rounded != nullptr ? &view : nullptr);
}

}  // namespace octo::cuda
