// RMSNorm on the CPU: the reference the CUDA version is tested against.
// Semantics and preconditions: kernels/ops.h.
#include <cmath>
#include <cstddef>

#include "absl/status/status.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cpu {

absl::Status RmsNorm(const float* x, const float* weight, float* out, int n_rows, int dim,
                     float eps) {
  absl::Status args = CheckRmsNormArgs(x, weight, out, n_rows, dim, eps);
  if (!args.ok()) return args;

  for (int r = 0; r < n_rows; ++r) {
    const float* x_row = x + static_cast<size_t>(r) * dim;  // (dim)
    float* out_row = out + static_cast<size_t>(r) * dim;    // (dim)

    // Sum of squares in float, in index order (see ops.h).
    float ss = 0.0f;
    for (int i = 0; i < dim; ++i) ss += x_row[i] * x_row[i];
    const float scale = 1.0f / std::sqrt(ss / dim + eps);

    // Reads x_row[i] before writing out_row[i]: in place is fine.
    for (int i = 0; i < dim; ++i) out_row[i] = x_row[i] * scale * weight[i];
  }
  return absl::OkStatus();
}

}  // namespace octo::cpu
