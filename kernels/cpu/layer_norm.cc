// LayerNorm on the CPU, with llama.cpp's CPU numerics (its norm, then its
// mul and add ops): the reference the CUDA version is tested against.
// Semantics and preconditions: kernels/ops.h.
#include <cmath>
#include <cstddef>

#include "absl/status/status.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cpu {

absl::Status LayerNorm(const float* x, const float* weight, const float* bias, float* out, int n_rows, int dim,
                       float eps) {
  absl::Status args = CheckLayerNormArgs(x, weight, bias, out, n_rows, dim, eps);
  if (!args.ok()) return args;

  for (int r = 0; r < n_rows; ++r) {
    const float* x_row = x + static_cast<size_t>(r) * dim;  // (dim)
    float* out_row = out + static_cast<size_t>(r) * dim;    // (dim)

    // The sum in double in index order, the mean rounded to float.
    double sum = 0.0;
    for (int i = 0; i < dim; ++i) sum += x_row[i];
    const float mean = static_cast<float>(sum / dim);

    // Each centred value and its square in float, the squares summed in
    // double; the variance rounded to float before eps is added.
    double ss = 0.0;
    for (int i = 0; i < dim; ++i) {
      const float v = x_row[i] - mean;
      ss += static_cast<double>(v * v);
    }
    const float variance = static_cast<float>(ss / dim);
    const float scale = 1.0f / std::sqrt(variance + eps);

    // (v * scale) * weight + bias, each rounded: ggml scales in its norm and
    // applies the weight and the bias as separate ops. Reads x_row[i] before
    // writing out_row[i], and no later x_row[j]: in place is fine.
    for (int i = 0; i < dim; ++i) {
      const float v = x_row[i] - mean;
      out_row[i] = (v * scale) * weight[i] + bias[i];
    }
  }
  return absl::OkStatus();
}

}  // namespace octo::cpu
