// cuda::MatMulExperts (kernels/ops.h): every (token, choice) through the
// decode path of cuda::MatMul with its expert's matrix picked on the device,
// so each gets the bits cuda::MatMul's decode path gives it alone; and
// fused.h's MatMulExpertsGroup, several such stacks in one launch.
#include <cstdint>
#include <optional>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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

// A shared expert's matrix beside a routed stack of `type` (SharedExpertGlu,
// SharedExpertDown): that type, `cols` columns, out non-null and apart from
// x (n_tokens rows of each); its row bytes when so.
absl::StatusOr<int64_t> CheckShared(const char* op, const WeightMatrix& w, GgmlType type, int64_t cols, const float* x,
                                    const float* out, int n_tokens) {
  absl::StatusOr<int64_t> row_bytes = CheckWeightShape(op, w);
  if (!row_bytes.ok()) return row_bytes.status();
  if (absl::Status aligned = matmul::CheckWeightAlignment(op, w); !aligned.ok()) return aligned;
  if (w.type != type || w.cols != cols || w.rows > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the shared expert's matrix is %s, %d x %d (the routed experts' %s, %d columns, at most 2^31 rows)", op,
        GgmlTypeName(w.type), w.rows, w.cols, GgmlTypeName(type), cols));
  }
  if (out == nullptr) return absl::InvalidArgumentError(absl::StrCat(op, ": the shared expert's out is null"));
  if (Overlaps(x, int64_t{n_tokens} * w.cols * 4, out, int64_t{n_tokens} * w.rows * 4)) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": the shared expert's out overlaps its x"));
  }
  return row_bytes;
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

absl::Status MatMulExpertsCombineNorm(const WeightMatrix& w, const int32_t* expert_ids, const float* x, float* out,
                                      const MatMulExpertsParams& p, const CombineAfterExperts& tail,
                                      const Exec& exec, const ActQ8Out& rounded, const ActQ8Out* round_norm,
                                      const SharedExpertDown* shared) {
  absl::StatusOr<ExpertLayout> layout = CheckExperts(w, expert_ids, x, out, p, exec);
  if (!layout.ok()) return layout.status();
  if (ExpertsRounding(w) != rounded.rule || rounded.q == nullptr || rounded.d == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMulExpertsCombineNorm: %s weights do not read activations rounded by the rule given", GgmlTypeName(w.type)));
  }
  const MoeCombineParams& c = tail.combine;
  if (c.expert_out != out || c.n_rows != p.n_tokens || c.k != p.k || c.dim != w.rows / p.n_experts) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMulExpertsCombineNorm: the combine reads %d rows of %d choices of %d (the launch's out: %d of %d of %d)",
        c.n_rows, c.k, c.dim, p.n_tokens, p.k, w.rows / p.n_experts));
  }
  if (p.n_tokens > kMaxNormAfterAddTokens) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MatMulExpertsCombineNorm: %d tokens (its last block norms at most %d)", p.n_tokens, kMaxNormAfterAddTokens));
  }
  if (tail.arrival == nullptr) return absl::InvalidArgumentError("MatMulExpertsCombineNorm: no arrival counter");
  if (absl::Status args = CheckCombineAddRmsNorm(c, tail.x, tail.weight, tail.eps); !args.ok()) return args;
  if (round_norm != nullptr) {
    if (absl::Status s = CheckRounding("MatMulExpertsCombineNorm", c.dim, *round_norm); !s.ok()) return s;
  }
  const matmul::ActQ8View view{rounded.q, rounded.d};
  if (shared == nullptr) {
    return matmul::DecodeExperts({&w, 1}, w.rows / p.n_experts, layout->row_bytes, layout->expert_bytes, expert_ids,
                                 x, {&out, 1}, p, exec, &view, &tail, round_norm);
  }
  constexpr const char* kOp = "MatMulExpertsCombineNorm";
  absl::StatusOr<int64_t> shared_row_bytes =
      CheckShared(kOp, shared->w, w.type, shared->w.cols, shared->x, shared->out, p.n_tokens);
  if (!shared_row_bytes.ok()) return shared_row_bytes.status();
  if (shared->w.rows != c.dim || shared->out != c.shared) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the shared expert's down gives %d rows (the combine's %d) and must write the combine's shared rows", kOp,
        shared->w.rows, c.dim));
  }
  if (shared->rounded.rule != rounded.rule || shared->rounded.q == nullptr || shared->rounded.d == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": the shared expert's x is not rounded by the routed experts' rule"));
  }
  const matmul::SharedSlice slice{&shared->w, nullptr, *shared_row_bytes, shared->out,
                                  matmul::ActQ8View{shared->rounded.q, shared->rounded.d}, nullptr};
  return matmul::DecodeExperts({&w, 1}, w.rows / p.n_experts, layout->row_bytes, layout->expert_bytes, expert_ids, x,
                               {&out, 1}, p, exec, &view, &tail, round_norm, &slice);
}

absl::Status MatMulExpertsGlu(const WeightMatrix& gate, const WeightMatrix& up, const int32_t* expert_ids,
                              const float* x, float* out, const MatMulExpertsParams& p, const Exec& exec,
                              const ActQ8Out* round_out, const ActQ8Out* rounded, const SharedExpertGlu* shared) {
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
  if (shared == nullptr) {
    return matmul::DecodeExpertsGlu(gate, up, rows, layout->row_bytes, layout->expert_bytes, expert_ids, x, out, p,
                                    exec, round_out, rounded != nullptr ? &view : nullptr);
  }
  constexpr const char* kOp = "MatMulExpertsGlu";
  absl::StatusOr<int64_t> shared_row_bytes = CheckShared(kOp, shared->gate, gate.type, gate.cols, x, shared->out, p.n_tokens);
  if (!shared_row_bytes.ok()) return shared_row_bytes.status();
  if (absl::StatusOr<int64_t> up_bytes = CheckShared(kOp, shared->up, gate.type, gate.cols, x, shared->out, p.n_tokens);
      !up_bytes.ok()) {
    return up_bytes.status();
  }
  if (shared->up.rows != shared->gate.rows) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: the shared expert's gate has %d rows, its up %d", kOp,
                                                      shared->gate.rows, shared->up.rows));
  }
  const int64_t out_bytes = int64_t{p.n_tokens} * p.k * rows * 4, shared_bytes = int64_t{p.n_tokens} * shared->gate.rows * 4;
  if (Overlaps(out, out_bytes, shared->out, shared_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": the shared expert's out overlaps the experts'"));
  }
  if (shared->round_out != nullptr) {
    if (absl::Status s = matmul::CheckGluRounding(kOp, shared->gate, shared->gate.rows, *shared->round_out); !s.ok()) {
      return s;
    }
  }
  const matmul::SharedSlice slice{&shared->gate, &shared->up, *shared_row_bytes, shared->out, {}, shared->round_out};
  return matmul::DecodeExpertsGlu(gate, up, rows, layout->row_bytes, layout->expert_bytes, expert_ids, x, out, p, exec,
                                  round_out, rounded != nullptr ? &view : nullptr, &slice);
}

}  // namespace octo::cuda
