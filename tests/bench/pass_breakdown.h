// Where a forward pass's time goes, for the kernel owners: the whole pass
// (ForwardLlama) and every weight matrix of the model multiplied alone with
// cpu::MatMul, timed in turn on the same weights, pool and SIMD path, so the
// two see the same machine (others' load on a shared machine drifts).
//
// The MatMuls run in the order the pass uses them, so each matrix is as cold
// in the cache as in a real pass. Attention is timed alone too, over the
// caches the pass filled. Pass minus both is the rest: norms, RoPE, SiLU,
// residuals, the embedding lookup, the KV-cache appends and the pool's
// hand-offs.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/engine/weight_store.h"
#include "kernels/ops.h"

namespace octo::bench {

struct MatMulRole {
  std::string role;       // "wq", "wk", "wv", "wo", "gate", "up", "down", "lm_head"
  std::string types;      // the GGUF types it has across layers, e.g. "Q6_K+Q4_K"
  uint64_t bytes = 0;     // summed over layers
  uint64_t elements = 0;  // rows * cols summed over layers (multiply-adds per row of x)
  int n_rows = 0;         // rows of x multiplied per pass (the lm_head: one per sequence)
  double seconds = 0;     // per pass, summed over layers (median of the reps)
};

struct PassBreakdown {
  std::vector<MatMulRole> roles;
  double matmul_seconds = 0;     // all roles
  double attention_seconds = 0;  // cpu::Attention alone, every layer and sequence (median)
  double attention_flops = 0;    // its multiply-adds x 2 (q.k and att.v) per pass
  double pass_seconds = 0;       // the whole pass (median of the reps)
  // Each layer's share of the pass (Acquire to Release, last rep): layers
  // have the same shapes, so a spread means a value-dependent cost.
  std::vector<double> layer_seconds;
};

// A pass of n_seqs sequences with tokens_per_seq new tokens each, after a
// prompt of prompt_tokens (untimed; 0 for none): decode is (1, 1, P) or
// (8, 1, P), a prefill (1, 512, 0). Dense models only: INVALID_ARGUMENT for
// a mixture of experts. Errors of the store and the pass pass through.
absl::StatusOr<PassBreakdown> BreakDownPass(WeightStore& store, const cpu::Exec& exec, int n_seqs, int tokens_per_seq,
                                            int prompt_tokens, int reps);

}  // namespace octo::bench
