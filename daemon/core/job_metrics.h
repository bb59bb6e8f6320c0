// What the generation requests did, summed since start, for /metrics: how
// many ended well or not, their prompt and generated tokens, and the
// distributions of time to first token and of the gap between tokens.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace octo {

struct JobStats;  // runtime.h

// Prometheus's kind of histogram: counts per upper bound (le), their sum.
struct Histogram {
  std::vector<double> bounds;    // ascending upper bounds; +Inf is implied
  std::vector<uint64_t> counts;  // per bucket, bounds.size() + 1 of them (the last: above every bound)
  double sum = 0;
  uint64_t count = 0;

  explicit Histogram(std::vector<double> upper_bounds);
  // `n` observations of `value`.
  void Observe(double value, uint64_t n = 1);
};

struct JobTotals {
  uint64_t ok = 0, failed = 0;
  uint64_t prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0;
  // Seconds from a request's arrival in the queue to its first token
  // decided (queue + prompt), and between its tokens (its decode time over
  // its gaps, observed once per gap).
  Histogram time_to_first_token{{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}};
  Histogram inter_token{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}};
};

class JobMetrics {
 public:
  // One ended job: its stats, its generated tokens, whether it succeeded.
  void Observe(const JobStats& stats, int generated_tokens, bool ok);
  JobTotals Totals() const;

 private:
  mutable std::mutex mu_;
  JobTotals totals_ ABSL_GUARDED_BY(mu_);
};

}  // namespace octo
