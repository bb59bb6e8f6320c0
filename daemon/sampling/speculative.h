// Speculative sampling by rejection (Leviathan, Kalman, Matias, "Fast
// Inference from Transformers via Speculative Decoding", ICML 2023; Chen et
// al., "Accelerating Large Language Model Decoding with Speculative
// Sampling", 2023): a draft model proposes tokens d_0 .. d_{k-1}, each drawn
// from its distribution q_i; the target model scores all of them in one
// pass, giving p_0 .. p_k. Token i is kept with probability
// min(1, p_i(d_i) / q_i(d_i)); at the first refusal the output is a draw
// from the residual max(0, p_i - q_i), normalised, and the round ends; when
// every draft token is kept, a draw from p_k follows. Each output token is
// then distributed exactly as p (tests/daemon/sampling/speculative_test.cc
// checks it by chi-square).
//
// Greedy falls out of the same rule: p and q are then point masses on the
// argmaxes, so a draft token is kept exactly when it is the target's argmax,
// and the residual of a refused one is the target's argmax.
//
// Distributions are Sampler::Distribution's: ascending ids, probabilities
// > 0 summing to 1. Random numbers come from the generation's Sampler
// (NextUniform): one per draft token examined, one for the final draw.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/sampling/transforms.h"

namespace octo {

struct SpeculativeOutcome {
  int accepted = 0;    // draft tokens kept, 0 .. k
  int32_t next = -1;   // the token after them: a residual draw, or p_k's
};

// p(id) in a distribution listed by ascending id; 0 when absent.
double ProbabilityOf(std::span<const TokenProb> dist, int32_t id);

// Verifies `draft` (k tokens, draft[i] drawn from q[i]) against the
// target's p (k + 1 distributions). `uniform` returns the next number in
// [0, 1). INVALID_ARGUMENT when the sizes disagree, a distribution is empty,
// or a draft token has q = 0 (it could not have been drawn).
absl::StatusOr<SpeculativeOutcome> VerifyDraft(std::span<const int32_t> draft,
                                               std::span<const std::vector<TokenProb>> q,
                                               std::span<const std::vector<TokenProb>> p,
                                               const std::function<double()>& uniform);

// A draw from `dist` with u in [0, 1): the first id, in ascending order,
// whose cumulative probability exceeds u * total (the last one if rounding
// leaves u at the very end).
int32_t DrawFrom(std::span<const TokenProb> dist, double u);

}  // namespace octo
