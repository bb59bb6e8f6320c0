#include "daemon/sampling/speculative.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace octo {

double ProbabilityOf(std::span<const TokenProb> dist, int32_t id) {
  const auto it = std::lower_bound(dist.begin(), dist.end(), id,
                                   [](const TokenProb& t, int32_t v) { return t.id < v; });
  return it != dist.end() && it->id == id ? it->p : 0.0;
}

int32_t DrawFrom(std::span<const TokenProb> dist, double u) {
  double total = 0;
  for (const TokenProb& t : dist) total += t.p;
  const double target = u * total;
  double cumulative = 0;
  int32_t last = -1;
  for (const TokenProb& t : dist) {
    if (t.p <= 0) continue;
    cumulative += t.p;
    last = t.id;
    if (cumulative > target) return t.id;
  }
  return last;
}

absl::StatusOr<SpeculativeOutcome> VerifyDraft(std::span<const int32_t> draft,
                                               std::span<const std::vector<TokenProb>> q,
                                               std::span<const std::vector<TokenProb>> p,
                                               const std::function<double()>& uniform) {
  if (q.size() != draft.size() || p.size() != draft.size() + 1) {
    return absl::InvalidArgumentError(absl::StrCat("speculative: ", draft.size(), " draft tokens need as many draft ",
                                                   "distributions (got ", q.size(), ") and one more target ",
                                                   "distribution (got ", p.size(), ")"));
  }
  for (const std::vector<TokenProb>& d : p) {
    if (d.empty()) return absl::InvalidArgumentError("speculative: an empty target distribution");
  }
  for (size_t i = 0; i < draft.size(); ++i) {
    const double qx = ProbabilityOf(q[i], draft[i]);
    if (!(qx > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("speculative: draft token ", draft[i], " at ", i, " has draft probability 0"));
    }
    const double px = ProbabilityOf(p[i], draft[i]);
    // Kept with probability min(1, px / qx); u * qx < px avoids the division.
    if (uniform() * qx < px) continue;
    // Refused: draw from max(0, p - q). p > q somewhere, since px < qx and
    // both sum to 1; if rounding left nothing, p itself is the answer.
    std::vector<TokenProb> residual;
    for (const TokenProb& t : p[i]) {
      const double r = t.p - ProbabilityOf(q[i], t.id);
      if (r > 0) residual.push_back({t.id, r});
    }
    const double u = uniform();
    return SpeculativeOutcome{.accepted = static_cast<int>(i),
                              .next = residual.empty() ? DrawFrom(p[i], u) : DrawFrom(residual, u)};
  }
  return SpeculativeOutcome{.accepted = static_cast<int>(draft.size()), .next = DrawFrom(p[draft.size()], uniform())};
}

}  // namespace octo
