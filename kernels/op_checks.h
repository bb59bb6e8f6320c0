// Argument checks shared by the CPU and CUDA versions of each op, so both
// refuse exactly the same inputs with the same message (INVALID_ARGUMENT).
// Host code only; safe to include from .cu files.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace octo {

inline absl::Status CheckRmsNormArgs(const float* x, const float* weight, const float* out, int n_rows, int dim,
                                     float eps) {
  if (x == nullptr || weight == nullptr || out == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("RmsNorm: null pointer (x=%p, weight=%p, out=%p)", x, weight, out));
  }
  if (n_rows <= 0 || dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("RmsNorm: n_rows (%d) and dim (%d) must be positive", n_rows, dim));
  }
  if (!(eps >= 0.0f)) {  // also refuses NaN
    return absl::InvalidArgumentError(absl::StrFormat("RmsNorm: eps (%g) must be >= 0", eps));
  }
  return absl::OkStatus();
}

}  // namespace octo
