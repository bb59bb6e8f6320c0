// MoeCombine on the CPU: the weighted sum of each row's chosen experts, plus
// the gated shared expert. Semantics: kernels/ops.h.
#include <cmath>
#include <cstddef>

#include "absl/status/status.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cpu {

absl::Status MoeCombine(const MoeCombineParams& p) {
  absl::Status args = CheckMoeCombineArgs(p);
  if (!args.ok()) return args;
  const size_t dim = static_cast<size_t>(p.dim);
  for (int r = 0; r < p.n_rows; ++r) {
    float* out = p.out + r * dim;                                       // (dim)
    const float* weights = p.weights + static_cast<size_t>(r) * p.k;    // (k)
    const float* expert_out = p.expert_out + static_cast<size_t>(r) * p.k * dim;  // (k, dim)
    float gate = 1.0f;
    if (p.shared != nullptr && p.shared_gate_logits != nullptr) gate = 1.0f / (1.0f + std::exp(-p.shared_gate_logits[r]));
    for (size_t i = 0; i < dim; ++i) {
      float acc = 0.0f;
      for (int j = 0; j < p.k; ++j) acc = acc + expert_out[j * dim + i] * weights[j];
      if (p.shared != nullptr) acc = acc + p.shared[r * dim + i] * gate;
      out[i] = acc;
    }
  }
  return absl::OkStatus();
}

}  // namespace octo::cpu
