// MatMulExperts on the CPU: the rows routed to each expert gathered and run
// through MatMul together, so each expert's matrix is walked once per call
// and every (token, choice) gets exactly MatMul's bits for it alone
// (MatMul's output rows are independent). Semantics: kernels/ops.h.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"
#include "storage/status_macros.h"

namespace octo::cpu {

absl::Status MatMulExperts(const WeightMatrix& w, const int32_t* expert_ids, const float* x, float* out,
                           const MatMulExpertsParams& p, const Exec& exec) {
  OCTO_ASSIGN_OR_RETURN(const ExpertLayout layout, CheckMatMulExpertsArgs(w, expert_ids, x, out, p));
  const int n_choices = p.n_tokens * p.k;
  for (int i = 0; i < n_choices; ++i) {
    if (expert_ids[i] < 0 || expert_ids[i] >= p.n_experts) {
      return absl::InvalidArgumentError(absl::StrFormat("MatMulExperts: expert_ids[%d][%d] (%d) is not in [0, %d)",
                                                        i / p.k, i % p.k, expert_ids[i], p.n_experts));
    }
  }
  const int64_t rows = w.rows / p.n_experts;
  const size_t cols = static_cast<size_t>(w.cols);
  std::vector<int> choices;  // (m) the (token, choice) indices routed to expert e
  std::vector<float> in;     // (m, cols)
  std::vector<float> result; // (m, rows)
  for (int e = 0; e < p.n_experts; ++e) {
    choices.clear();
    for (int i = 0; i < n_choices; ++i) {
      if (expert_ids[i] == e) choices.push_back(i);
    }
    if (choices.empty()) continue;
    const int m = static_cast<int>(choices.size());
    in.resize(m * cols);
    result.resize(static_cast<size_t>(m) * rows);
    for (int r = 0; r < m; ++r) {
      const int i = choices[r];
      const float* x_row = x + (p.x_per_choice ? static_cast<size_t>(i) : static_cast<size_t>(i / p.k)) * cols;
      std::memcpy(&in[r * cols], x_row, cols * sizeof(float));
    }
    const WeightMatrix expert{w.type, static_cast<const uint8_t*>(w.data) + e * layout.expert_bytes, rows, w.cols};
    OCTO_RETURN_IF_ERROR(MatMul(expert, in.data(), result.data(), m, exec));
    for (int r = 0; r < m; ++r) {
      std::memcpy(out + static_cast<size_t>(choices[r]) * rows, &result[static_cast<size_t>(r) * rows],
                  rows * sizeof(float));
    }
  }
  return absl::OkStatus();
}

}  // namespace octo::cpu
