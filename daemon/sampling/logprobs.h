// Log-probabilities to report with generated tokens.
//
// What we report: log softmax of the model's raw logits, computed in double,
// before any sampling step (no penalties, no temperature, no top-k/p or
// min-p truncation). A token's logprob therefore says how likely the model
// found it, whatever the request's sampling settings, and the reported
// alternatives are the model's most likely tokens, which the chain may have
// excluded. This is what llama.cpp's server reports by default
// (n_probs with post_sampling_probs = false: "a simple softmax of the logits
// without considering any other sampler settings") and what vLLM reports by
// default (raw logprobs); OpenAI's API documents logprobs as the model's
// log-probability of each token. The probability the sampler actually drew
// with is not reported.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/sampling/logit_candidates.h"

namespace octo {

struct TokenLogprob {
  int32_t id;
  double logprob;    // natural log, <= 0; -inf for a masked (-inf) logit
  std::string text;  // the token's piece, when the caller has a tokenizer (Generation fills it)
};

// The min(n, vocab) most likely tokens with their logprobs, most likely
// first, equal logprobs by lower id. n = 0 gives an empty list.
// INVALID_ARGUMENT for n < 0, empty logits, a NaN or +inf logit, or no
// finite logit. O(vocab log n).
absl::StatusOr<std::vector<TokenLogprob>> TopLogprobs(std::span<const float> logits, int n);

// The logprob of token `id`. INVALID_ARGUMENT for an id outside the
// vocabulary and for the logits TopLogprobs rejects.
absl::StatusOr<double> Logprob(std::span<const float> logits, int32_t id);

// The same from a row's candidates (logit_candidates.h), with the same
// errors; besides, FAILED_PRECONDITION when `id` is not among them or n
// exceeds them.
absl::StatusOr<std::vector<TokenLogprob>> TopLogprobs(const LogitCandidates& row, int n);
absl::StatusOr<double> Logprob(const LogitCandidates& row, int32_t id);

}  // namespace octo
