#include "daemon/sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "daemon/sampling/transforms.h"
#include "kernels/sum_exp.h"

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
  // In the order TopLogits sums (kernels/sum_exp.h): a row's candidates
  // give this result bit for bit.
  return max_logit + std::log(SumExpInOrder(logits.data(), logits.size(), max_logit));
}

// LogSumExp's result from a reduced row: its max and sum, the checks on
// what the reduction found.
absl::StatusOr<double> LogSumExp(const LogitCandidates& row) {
  if (row.vocab == 0) return absl::InvalidArgumentError("logprobs: no logits");
  if (row.bad_id >= 0) {
    return absl::InvalidArgumentError(absl::StrCat("logprobs: logit of token ", row.bad_id, " is ", row.bad_logit));
  }
  if (!std::isfinite(row.max_logit)) return absl::InvalidArgumentError("logprobs: every logit is -inf");
  return row.max_logit + std::log(row.sum_exp);
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

absl::StatusOr<std::vector<TokenLogprob>> TopLogprobs(const LogitCandidates& row, int n) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("logprobs: asked for ", n, " top tokens"));
  const absl::StatusOr<double> log_sum = LogSumExp(row);
  if (!log_sum.ok()) return log_sum.status();
  const size_t count = std::min(static_cast<size_t>(n), row.vocab);
  if (count > row.top.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("logprobs: asked for ", n, " top tokens of a row reduced to ", row.top.size()));
  }
  std::vector<TokenLogprob> top(count);
  for (size_t i = 0; i < count; ++i) top[i] = {row.top[i].id, static_cast<double>(row.top[i].logit) - *log_sum, {}};
  return top;
}

absl::StatusOr<double> Logprob(const LogitCandidates& row, int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= row.vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("logprobs: token ", id, " is outside the vocabulary [0, ", row.vocab, ")"));
  }
  const absl::StatusOr<double> log_sum = LogSumExp(row);
  if (!log_sum.ok()) return log_sum.status();
  for (const TokenLogit& c : row.top) {
    if (c.id == id) return static_cast<double>(c.logit) - *log_sum;
  }
  return absl::FailedPreconditionError(absl::StrCat("logprobs: token ", id, " is not among the row's ",
                                                    row.top.size(), " candidates"));
}

}  // namespace octo
