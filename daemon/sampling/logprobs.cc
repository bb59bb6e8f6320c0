#include "daemon/sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "daemon/sampling/transforms.h"

namespace octo {
namespace {

// log(sum(exp(logits))), in double and shifted by the largest logit so it
// neither overflows nor underflows. Checks the logits on the way.
absl::StatusOr<double> LogSumExp(std::span<const float> logits) {
  if (logits.empty()) return absl::InvalidArgumentError("logprobs: no logits");
  float max_logit = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i]) || logits[i] == std::numeric_limits<float>::infinity()) {
      return absl::InvalidArgumentError(absl::StrCat("logprobs: logit of token ", i, " is ", logits[i]));
    }
    max_logit = std::max(max_logit, logits[i]);
  }
  if (!std::isfinite(max_logit)) return absl::InvalidArgumentError("logprobs: every logit is -inf");
  double sum = 0;
  for (float logit : logits) sum += std::exp(static_cast<double>(logit) - max_logit);
  return max_logit + std::log(sum);
}

}  // namespace

absl::StatusOr<std::vector<TokenLogprob>> TopLogprobs(std::span<const float> logits, int n) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("logprobs: asked for ", n, " top tokens"));
  const absl::StatusOr<double> log_sum = LogSumExp(logits);
  if (!log_sum.ok()) return log_sum.status();

  // The n best of the vocabulary by MoreLikely (logit desc, id asc), which is
  // also the logprob order. partial_sort keeps a heap of n: O(V log n).
  std::vector<TokenLogit> all(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) all[i] = {static_cast<int32_t>(i), logits[i]};
  const size_t count = std::min(static_cast<size_t>(n), all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<ptrdiff_t>(count), all.end(), MoreLikely);

  std::vector<TokenLogprob> top(count);
  for (size_t i = 0; i < count; ++i) top[i] = {all[i].id, static_cast<double>(all[i].logit) - *log_sum, {}};
  return top;
}

absl::StatusOr<double> Logprob(std::span<const float> logits, int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= logits.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("logprobs: token ", id, " is outside the vocabulary [0, ", logits.size(), ")"));
  }
  const absl::StatusOr<double> log_sum = LogSumExp(logits);
  if (!log_sum.ok()) return log_sum.status();
  return static_cast<double>(logits[id]) - *log_sum;
}

}  // namespace octo
