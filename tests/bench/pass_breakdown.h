// Where a pass's time goes: every weight matrix of a dense model multiplied
// alone with cpu::MatMul (same thread pool and SIMD path as the engine), in
// the order the forward pass uses them, so each matrix is as cold in the
// cache as it is in a real pass. engine_bench subtracts the total from the
// measured pass: the rest is attention, norms, RoPE, residuals, the
// embedding lookup and the KV-cache appends.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/engine/weight_store.h"
#include "kernels/ops.h"

namespace octo::bench {

struct MatMulRole {
  std::string role;     // "wq", "wk", "wv", "wo", "gate", "up", "down", "lm_head"
  std::string types;    // the GGUF types it has across layers, e.g. "Q4_K+Q6_K"
  uint64_t bytes = 0;   // summed over layers
  uint64_t elements = 0;  // rows * cols summed over layers (multiply-adds per token)
  double seconds = 0;   // per pass, summed over layers (median of the reps)
};

struct MatMulBreakdown {
  std::vector<MatMulRole> roles;
  double seconds = 0;  // all roles
};

// Multiplies n_tokens rows through every layer matrix and n_out rows through
// the lm_head, `reps` times. Dense models only: INVALID_ARGUMENT for a
// mixture of experts. Errors of store.Acquire pass through.
absl::StatusOr<MatMulBreakdown> TimeMatMuls(WeightStore& store, int n_tokens, int n_out,
                                            const cpu::Exec& exec, int reps);

}  // namespace octo::bench
