// SiLU-gated product (the SwiGLU feed-forward's middle step) on the CPU, as
// ggml's swiglu computes it in scalar code. Semantics: kernels/ops.h.
#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cpu {

absl::Status SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  absl::Status args = CheckSiluMulArgs(gate, up, out, n);
  if (!args.ok()) return args;
  // Reads gate[i] and up[i] before writing out[i]: out may alias either.
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float silu = g / (1.0f + std::exp(-g));
    out[i] = silu * up[i];
  }
  return absl::OkStatus();
}

}  // namespace octo::cpu
