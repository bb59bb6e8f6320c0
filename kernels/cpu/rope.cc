// Rotary position embedding on the CPU, computed as ggml's rope computes it
// (normal and neox modes, no YaRN, freq_scale 1). Semantics: kernels/ops.h.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cpu {

absl::Status Rope(float* x, const int32_t* positions, int n_tokens, const RopeParams& p) {
  absl::Status args = CheckRopeArgs(x, positions, n_tokens, p);
  if (!args.ok()) return args;

  const int n_pairs = p.rope_dim / 2;
  // Pair i is (x[2i], x[2i+1]) in normal mode, (x[i], x[i + n_pairs]) in neox.
  const int pair_stride = p.neox ? 1 : 2;
  const int partner_offset = p.neox ? n_pairs : 1;
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.rope_dim));

  std::vector<float> cos_theta(n_pairs);  // (n_pairs), for the current token
  std::vector<float> sin_theta(n_pairs);
  for (int t = 0; t < n_tokens; ++t) {
    // theta_i = pos * theta_scale^i, multiplied up pair by pair in float
    // (not powf per pair): this rounding is ggml's, and the logits see it.
    float theta = static_cast<float>(positions[t]);
    for (int i = 0; i < n_pairs; ++i) {
      const float angle = p.freq_factors != nullptr ? theta / p.freq_factors[i] : theta;
      cos_theta[i] = std::cos(angle);
      sin_theta[i] = std::sin(angle);
      theta *= theta_scale;
    }

    float* x_token = x + static_cast<size_t>(t) * p.n_heads * p.head_dim;
    for (int h = 0; h < p.n_heads; ++h) {
      float* x_head = x_token + static_cast<size_t>(h) * p.head_dim;  // (head_dim)
      for (int i = 0; i < n_pairs; ++i) {
        float* a = x_head + i * pair_stride;
        float* b = a + partner_offset;
        const float x0 = *a;
        const float x1 = *b;
        *a = x0 * cos_theta[i] - x1 * sin_theta[i];
        *b = x0 * sin_theta[i] + x1 * cos_theta[i];
      }
      // Dimensions rope_dim..head_dim-1 stay as they are.
    }
  }
  return absl::OkStatus();
}

}  // namespace octo::cpu
