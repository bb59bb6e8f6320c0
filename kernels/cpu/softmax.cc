// Row softmax on the CPU with ggml's numerics. Semantics: kernels/ops.h and
// kernels/cpu/softmax_row.h.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/softmax_row.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cpu {

void SoftmaxRow(float* x, int64_t n) {
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = std::fmax(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float e = std::exp(x[i] - max);
    sum += static_cast<double>(e);
    x[i] = e;
  }
  // ggml computes 1.0/sum in double and scales by it as a float.
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv_sum;
}

absl::Status Softmax(float* x, int n_rows, int n) {
  absl::Status args = CheckSoftmaxArgs(x, n_rows, n);
  if (!args.ok()) return args;
  for (int r = 0; r < n_rows; ++r) SoftmaxRow(x + static_cast<size_t>(r) * n, n);
  return absl::OkStatus();
}

}  // namespace octo::cpu
