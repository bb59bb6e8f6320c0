// RMSNorm on the CPU, with llama.cpp's CPU numerics: the reference the CUDA
// version is tested against. Semantics and preconditions: kernels/ops.h.
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

    // Each square in float, summed in double in index order; the mean is
    // rounded to float before eps is added (ggml's rms_norm, see ops.h).
    double ss = 0.0;
    for (int i = 0; i < dim; ++i) ss += static_cast<double>(x_row[i] * x_row[i]);
    const float mean = static_cast<float>(ss / dim);
    const float scale = 1.0f / std::sqrt(mean + eps);

    // (x * scale) * weight, in that order: ggml scales in rms_norm and
    // multiplies by the weight in a separate op. Reads x_row[i] before
    // writing out_row[i]: in place is fine.
    for (int i = 0; i < dim; ++i) out_row[i] = (x_row[i] * scale) * weight[i];
  }
  return absl::OkStatus();
}

}  // namespace octo::cpu
