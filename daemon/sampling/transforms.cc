#include "daemon/sampling/transforms.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace octo {
namespace {

// KeepTopP sorts the list in growing chunks, starting with this many.
constexpr size_t kTopPFirstChunk = 64;
// KeepTopK selects with a heap (partial_sort) when k is at most 1/this of the
// list, else with nth_element: a small heap rejects most candidates with one
// comparison, a large one costs log k per candidate.
constexpr size_t kPartialSortRatio = 16;

float MaxLogit(const std::vector<TokenLogit>& candidates) {
  float max_logit = -std::numeric_limits<float>::infinity();
  for (const TokenLogit& c : candidates) max_logit = std::max(max_logit, c.logit);
  return max_logit;
}

// Unnormalised probability, relative to the largest logit.
double Weight(float logit, float max_logit) {
  return std::exp(static_cast<double>(logit) - static_cast<double>(max_logit));
}

}  // namespace

int32_t ArgmaxLowestId(std::span<const float> logits) {
  int32_t best = -1;
  float best_logit = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_logit) {  // strict: an equal logit later keeps the lower id
      best_logit = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

absl::Status ApplyPenalties(std::span<float> logits, std::span<const int32_t> window, double repeat,
                            double frequency, double presence) {
  if (window.empty() || (repeat == 1.0 && frequency == 0.0 && presence == 0.0)) return absl::OkStatus();
  absl::flat_hash_map<int32_t, int32_t> counts;
  for (size_t i = 0; i < window.size(); ++i) {
    const int32_t id = window[i];
    if (id < 0 || static_cast<size_t>(id) >= logits.size()) {
      return absl::InvalidArgumentError(absl::StrCat("token ", id, " at position ", i,
                                                     " of the penalty window is outside the vocabulary [0, ",
                                                     logits.size(), ")"));
    }
    ++counts[id];
  }
  for (const auto& [id, count] : counts) {
    double logit = logits[id];
    logit = logit > 0 ? logit / repeat : logit * repeat;
    logit -= count * frequency + presence;
    logits[id] = static_cast<float>(logit);
  }
  return absl::OkStatus();
}

void KeepTopK(std::vector<TokenLogit>& candidates, int32_t k) {
  if (k <= 0 || static_cast<size_t>(k) >= candidates.size()) return;
  const auto kth = candidates.begin() + k;
  if (static_cast<size_t>(k) <= candidates.size() / kPartialSortRatio) {
    // A heap of k: most candidates cost one comparison with its least element.
    std::partial_sort(candidates.begin(), kth, candidates.end(), MoreLikely);
  } else {
    std::nth_element(candidates.begin(), kth, candidates.end(), MoreLikely);
    std::sort(candidates.begin(), kth, MoreLikely);
  }
  candidates.resize(k);
}

void KeepTopP(std::vector<TokenLogit>& candidates, double p) { KeepTopPThenMinP(candidates, p, 0.0); }

void KeepTopPThenMinP(std::vector<TokenLogit>& candidates, double p, double min_p) {
  if (p >= 1.0) {
    KeepMinP(candidates, min_p);
    return;
  }
  if (candidates.size() <= 1) return;
  const float max_logit = MaxLogit(candidates);
  if (!std::isfinite(max_logit)) return;
  double total = 0;
  for (const TokenLogit& c : candidates) total += Weight(c.logit, max_logit);
  const double target = p * total;  // cumulative / total >= p, without dividing each term

  // Both steps keep a prefix of the MoreLikely order, so the result is the
  // shorter prefix: drop what min-p drops now (the normaliser above already
  // has it), and the nucleus below is sought among fewer candidates.
  KeepMinP(candidates, min_p);

  // Invariant: [0, sorted) holds the best `sorted` candidates in MoreLikely
  // order. Each round brings the next chunk (twice the last) to the front.
  double cumulative = 0;
  size_t sorted = 0;
  size_t chunk = kTopPFirstChunk;
  while (sorted < candidates.size()) {
    const size_t end = std::min(candidates.size(), sorted + chunk);
    const auto first = candidates.begin() + static_cast<ptrdiff_t>(sorted);
    const auto last = candidates.begin() + static_cast<ptrdiff_t>(end);
    if (last != candidates.end()) std::nth_element(first, last, candidates.end(), MoreLikely);
    std::sort(first, last, MoreLikely);
    for (size_t i = sorted; i < end; ++i) {
      cumulative += Weight(candidates[i].logit, max_logit);
      if (cumulative >= target) {
        candidates.resize(i + 1);
        return;
      }
    }
    sorted = end;
    chunk *= 2;
  }
}

void KeepMinP(std::vector<TokenLogit>& candidates, double min_p) {
  if (min_p <= 0 || candidates.size() <= 1) return;
  const double threshold = static_cast<double>(MaxLogit(candidates)) + std::log(min_p);
  std::erase_if(candidates, [threshold](const TokenLogit& c) { return c.logit < threshold; });
}

void ApplyTemperature(std::vector<TokenLogit>& candidates, double temperature) {
  const double max_logit = MaxLogit(candidates);
  if (!std::isfinite(max_logit)) return;
  for (TokenLogit& c : candidates) c.logit = static_cast<float>((c.logit - max_logit) / temperature);
}

int32_t DrawToken(std::vector<TokenLogit>& candidates, double u) {
  const auto by_id = [](const TokenLogit& a, const TokenLogit& b) { return a.id < b.id; };
  if (!std::is_sorted(candidates.begin(), candidates.end(), by_id)) {
    std::sort(candidates.begin(), candidates.end(), by_id);
  }
  const float max_logit = MaxLogit(candidates);
  if (!std::isfinite(max_logit)) return -1;
  double total = 0;
  for (const TokenLogit& c : candidates) total += Weight(c.logit, max_logit);
  const double target = u * total;
  double cumulative = 0;
  int32_t last_possible = -1;
  for (const TokenLogit& c : candidates) {
    const double weight = Weight(c.logit, max_logit);
    if (weight <= 0) continue;
    cumulative += weight;
    last_possible = c.id;
    if (cumulative > target) return c.id;
  }
  return last_possible;  // rounding left the target at the very end of the sum
}

std::vector<TokenProb> Probabilities(std::vector<TokenLogit>& candidates) {
  const auto by_id = [](const TokenLogit& a, const TokenLogit& b) { return a.id < b.id; };
  if (!std::is_sorted(candidates.begin(), candidates.end(), by_id)) {
    std::sort(candidates.begin(), candidates.end(), by_id);
  }
  std::vector<TokenProb> out;
  const float max_logit = MaxLogit(candidates);
  if (!std::isfinite(max_logit)) return out;
  double total = 0;
  for (const TokenLogit& c : candidates) total += Weight(c.logit, max_logit);
  for (const TokenLogit& c : candidates) {
    const double weight = Weight(c.logit, max_logit);
    if (weight > 0) out.push_back({c.id, weight / total});
  }
  return out;
}

}  // namespace octo
