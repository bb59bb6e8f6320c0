#include "daemon/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

uint64_t FreshSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace

absl::StatusOr<Sampler> Sampler::Create(const SamplingParams& params) {
  OCTO_RETURN_IF_ERROR(ValidateSamplingParams(params));
  return Sampler(params, params.seed.has_value() ? *params.seed : FreshSeed());
}

std::span<const int32_t> Sampler::PenaltyWindow(std::span<const int32_t> history) const {
  if (params_.repeat_last_n < 0) return history;
  const size_t n = std::min(history.size(), static_cast<size_t>(params_.repeat_last_n));
  return history.last(n);
}

absl::StatusOr<int32_t> Sampler::Prepare(std::span<const float> logits, std::span<const int32_t> history) {
  if (logits.empty()) return absl::InvalidArgumentError("sampler: no logits");
  if (logits.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("sampler: ", logits.size(), " logits exceed the int32 token ids"));
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i]) || logits[i] == std::numeric_limits<float>::infinity()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sampler: logit of token ", i, " is ", logits[i], "; the model's output is broken"));
    }
  }

  // 1. Penalties, on a copy: the caller's logits stay the model's (logprobs).
  logits_.assign(logits.begin(), logits.end());
  OCTO_RETURN_IF_ERROR(Annotate(ApplyPenalties(logits_, PenaltyWindow(history), params_.repeat_penalty,
                                               params_.frequency_penalty, params_.presence_penalty),
                                "sampler"));

  // 2. Greedy.
  if (params_.temperature == 0) {
    const int32_t best = ArgmaxLowestId(logits_);
    if (best < 0) return absl::InvalidArgumentError("sampler: every logit is -inf; no token can be chosen");
    return best;
  }

  // 3. Truncation. Masked tokens (-inf) are dropped first: they can never be drawn.
  candidates_.clear();
  for (size_t i = 0; i < logits_.size(); ++i) {
    if (logits_[i] != -std::numeric_limits<float>::infinity()) {
      candidates_.push_back({static_cast<int32_t>(i), logits_[i]});
    }
  }
  if (candidates_.empty()) return absl::InvalidArgumentError("sampler: every logit is -inf; no token can be chosen");
  KeepTopK(candidates_, params_.top_k);
  KeepTopPThenMinP(candidates_, params_.top_p, params_.min_p);
  ApplyTemperature(candidates_, params_.temperature);
  return -1;
}

absl::StatusOr<int32_t> Sampler::Sample(std::span<const float> logits, std::span<const int32_t> history) {
  absl::StatusOr<int32_t> greedy = Prepare(logits, history);
  if (!greedy.ok() || *greedy >= 0) return greedy;
  // 4. The draw.
  const int32_t token = DrawToken(candidates_, rng_.NextDouble());
  if (token < 0) return absl::InternalError("sampler: no candidate left to draw");  // the steps above keep one
  return token;
}

absl::StatusOr<int32_t> Sampler::Sample(const LogitCandidates& row) {
  if (!CandidatesDecide(params_)) {
    return absl::FailedPreconditionError("sampler: these sampling settings need the whole logits row");
  }
  // Prepare's checks, on what the reduction found.
  if (row.vocab == 0) return absl::InvalidArgumentError("sampler: no logits");
  if (row.vocab > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("sampler: ", row.vocab, " logits exceed the int32 token ids"));
  }
  if (row.bad_id >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampler: logit of token ", row.bad_id, " is ", row.bad_logit, "; the model's output is broken"));
  }
  if (row.n_finite == 0 || row.top.empty()) {
    return absl::InvalidArgumentError("sampler: every logit is -inf; no token can be chosen");
  }
  // 1. No penalties (CandidatesDecide). 2. Greedy: the best candidate.
  if (params_.temperature == 0) return row.top[0].id;
  // 3. The list KeepTopK leaves on the whole row, in its order: the k best
  // in MoreLikely order, or, when k reaches every finite logit, all of
  // them as the filter listed them, by id.
  const size_t k = static_cast<size_t>(params_.top_k);
  const size_t finite = static_cast<size_t>(row.n_finite);
  if (std::min(k, finite) > row.top.size()) return absl::InternalError("sampler: fewer candidates than top_k needs");
  candidates_.assign(row.top.begin(), row.top.begin() + static_cast<ptrdiff_t>(std::min(k, finite)));
  if (k >= finite) {
    std::sort(candidates_.begin(), candidates_.end(), [](const TokenLogit& a, const TokenLogit& b) { return a.id < b.id; });
  }
  KeepTopPThenMinP(candidates_, params_.top_p, params_.min_p);
  ApplyTemperature(candidates_, params_.temperature);
  // 4. The draw.
  const int32_t token = DrawToken(candidates_, rng_.NextDouble());
  if (token < 0) return absl::InternalError("sampler: no candidate left to draw");
  return token;
}

absl::StatusOr<std::vector<TokenProb>> Sampler::Distribution(std::span<const float> logits,
                                                             std::span<const int32_t> history) {
  absl::StatusOr<int32_t> greedy = Prepare(logits, history);
  if (!greedy.ok()) return greedy.status();
  if (*greedy >= 0) return std::vector<TokenProb>{{*greedy, 1.0}};
  std::vector<TokenProb> p = Probabilities(candidates_);
  if (p.empty()) return absl::InternalError("sampler: no candidate left to draw");
  return p;
}

}  // namespace octo
