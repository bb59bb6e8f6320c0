// RMSNorm on the CPU: the reference the CUDA version is tested against.
// Semantics and preconditions: kernels/ops.h.
#include <cmath>
#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/ops.h"

namespace octo::cpu {

absl::Status RmsNorm(const float* x, const float* weight, float* out, int n_rows, int dim,
                     float eps) {
  if (x == nullptr || weight == nullptr || out == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "RmsNorm: null pointer (x=%p, weight=%p, out=%p)", x, weight, out));
  }
  if (n_rows <= 0 || dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("RmsNorm: n_rows (%d) and dim (%d) must be positive", n_rows, dim));
  }
  if (!(eps >= 0.0f)) {
    return absl::InvalidArgumentError(absl::StrFormat("RmsNorm: eps (%g) must be >= 0", eps));
  }

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
