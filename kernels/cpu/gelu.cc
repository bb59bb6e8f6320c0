// GELU (tanh approximation) on the CPU, as llama.cpp's CPU backend computes
// it: fp16 in, fp16 out. Semantics: kernels/ops.h.
#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/half.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cpu {
namespace {

constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
constexpr float kGeluCoefA = 0.044715f;

// x rounded to fp16 and back.
float RoundToHalf(float x) { return Fp16ToFp32(Fp32ToFp16(x)); }

}  // namespace

absl::Status Gelu(const float* x, float* out, int64_t n) {
  absl::Status args = CheckGeluArgs(x, out, n);
  if (!args.ok()) return args;
  // llama.cpp reads gelu(fp16(x)) from a table of fp16 results; the same
  // float expression evaluated here gives the table's entry (ops.h). Outside
  // (-10, 10) it skips the table: gelu is 0 or x there to float precision.
  // Reads x[i] before writing out[i]: out may alias x.
  for (int64_t i = 0; i < n; ++i) {
    const float xi = x[i];
    if (xi <= -10.0f) {
      out[i] = 0.0f;
    } else if (xi >= 10.0f) {
      out[i] = xi;
    } else {
      const float h = RoundToHalf(xi);
      const float g = 0.5f * h * (1.0f + std::tanh(kSqrt2OverPi * h * (1.0f + kGeluCoefA * h * h)));
      out[i] = RoundToHalf(g);
    }
  }
  return absl::OkStatus();
}

}  // namespace octo::cpu
