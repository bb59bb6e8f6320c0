#include "daemon/core/job_metrics.h"

#include <algorithm>
#include <utility>

#include "daemon/core/runtime.h"

namespace octo {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::Observe(double value, uint64_t n) {
  const size_t bucket = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  counts[bucket] += n;
  sum += value * static_cast<double>(n);
  count += n;
}

void JobMetrics::Observe(const JobStats& stats, int generated_tokens, bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  (ok ? totals_.ok : totals_.failed)++;
  totals_.prompt_tokens += static_cast<uint64_t>(std::max(stats.prompt_tokens, 0));
  totals_.cached_tokens += static_cast<uint64_t>(std::max(stats.cached_tokens, 0));
  totals_.generated_tokens += static_cast<uint64_t>(std::max(generated_tokens, 0));
  if (generated_tokens > 0) totals_.time_to_first_token.Observe(stats.queue_seconds + stats.prefill_seconds);
  if (generated_tokens > 1) {
    totals_.inter_token.Observe(stats.decode_seconds / (generated_tokens - 1),
                                static_cast<uint64_t>(generated_tokens - 1));
  }
}

JobTotals JobMetrics::Totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return totals_;
}

}  // namespace octo
