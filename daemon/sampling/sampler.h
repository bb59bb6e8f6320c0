// Sampler: one generation's logits -> token step.
//
// Each call to Sample runs llama.cpp's default chain (see transforms.h):
//   1. penalties over the last repeat_last_n tokens of `history`
//   2. temperature 0: the argmax of the penalised logits (ties: lowest id)
//      and stop here; no random number is drawn
//   3. top-k -> top-p -> min-p on the penalised logits
//   4. divide by the temperature, softmax, draw one token
// Tokens whose logit is -inf (masked) are never chosen.
//
// Determinism: the generator is SplitMix64 (rng.h), advanced exactly once per
// non-greedy Sample call, and every step orders tokens by a total order. So
// the same seed, parameters and inputs give the same tokens on any machine
// whose libm exp() agrees (glibc's is correctly rounded in practice).
//
// Cost for a vocabulary V: a copy of the logits, O(V) for top-k
// (nth_element), O(V) plus a sort of the nucleus for top-p; never a full sort
// of V unless the nucleus is most of it.
//
// A Sampler belongs to one generation and is not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/sampling/logit_candidates.h"
#include "daemon/sampling/rng.h"
#include "daemon/sampling/sampling_params.h"
#include "daemon/sampling/transforms.h"

namespace octo {

class Sampler {
 public:
  // Validates `params` (ValidateSamplingParams) and seeds the generator:
  // params.seed, or a fresh random one when unset (see seed()).
  static absl::StatusOr<Sampler> Create(const SamplingParams& params);

  // The next token for `logits` (one per vocabulary entry, from the model)
  // given `history` (prompt and tokens generated so far, oldest first; only
  // its last repeat_last_n tokens matter). INVALID_ARGUMENT when `logits` is
  // empty, holds NaN or +inf, has no finite value, or when a token in the
  // penalty window is outside the vocabulary; the generator does not advance
  // then.
  absl::StatusOr<int32_t> Sample(std::span<const float> logits, std::span<const int32_t> history);
  // The same draw from the row's candidates (logit_candidates.h): the token,
  // the error and the generator's step Sample gives on the whole row, where
  // CandidatesDecide(params()) holds; FAILED_PRECONDITION where it does not
  // (no penalties there: the history does not matter).
  absl::StatusOr<int32_t> Sample(const LogitCandidates& row);

  // The distribution Sample draws from for these inputs: the candidates that
  // survive steps 1-3, in ascending id order, each with its probability
  // after the temperature (summing to 1); at temperature 0 the argmax alone
  // with probability 1. Speculative decoding verifies a draft against it
  // (speculative.h). Errors as Sample's; the generator does not advance.
  absl::StatusOr<std::vector<TokenProb>> Distribution(std::span<const float> logits,
                                                      std::span<const int32_t> history);
  // The next uniform number in [0, 1) from this generation's generator.
  double NextUniform() { return rng_.NextDouble(); }

  const SamplingParams& params() const { return params_; }
  // The seed in use: the requested one, or the one picked at Create. Report
  // it so a user can repeat a run.
  uint64_t seed() const { return seed_; }

 private:
  Sampler(const SamplingParams& params, uint64_t seed) : params_(params), seed_(seed), rng_(seed) {}

  // Steps 1-3: checks the logits, applies the penalties into logits_ and,
  // unless greedy, leaves the surviving candidates (temperature applied) in
  // candidates_. Returns the argmax when greedy, else -1.
  absl::StatusOr<int32_t> Prepare(std::span<const float> logits, std::span<const int32_t> history);
  // The last repeat_last_n tokens of `history` (all of it for -1).
  std::span<const int32_t> PenaltyWindow(std::span<const int32_t> history) const;

  SamplingParams params_;
  uint64_t seed_;
  SplitMix64 rng_;
  std::vector<float> logits_;              // (vocab) penalised copy of this step's logits
  std::vector<TokenLogit> candidates_;     // (<= vocab) the tokens still in the running
};

}  // namespace octo
