// Add and AddBias on the CPU: one float addition per element. Semantics:
// kernels/ops.h.
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cpu {

absl::Status Add(const float* a, const float* b, float* out, int64_t n) {
  absl::Status args = CheckAddArgs(a, b, out, n);
  if (!args.ok()) return args;
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];  // reads before it writes: out may alias a or b
  return absl::OkStatus();
}

absl::Status AddBias(float* x, const float* bias, int n_rows, int width) {
  absl::Status args = CheckAddBiasArgs(x, bias, n_rows, width);
  if (!args.ok()) return args;
  for (int r = 0; r < n_rows; ++r) {
    float* row = x + static_cast<size_t>(r) * width;  // (width)
    for (int i = 0; i < width; ++i) row[i] += bias[i];
  }
  return absl::OkStatus();
}

}  // namespace octo::cpu
