// TopLogits's test rows and its reference, a plain sort of the whole row:
// shared by the CPU and CUDA tests.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/ops.h"
#include "kernels/sum_exp.h"

namespace octo::testing {

// Rows of one width, with what each holds.
struct LogitRows {
  std::string what;
  int vocab = 0;
  std::vector<float> logits;  // (rows, vocab)
  int rows() const { return static_cast<int>(logits.size() / vocab); }
};

// Widths below, at and past kTopLogits and past a 1024-thread block (not a
// multiple of 32), with ties (at the cut too), -0 and +0, -inf (fewer
// finite logits than kTopLogits, and none), and one NaN or +inf row each.
inline std::vector<LogitRows> TopLogitsTestRows() {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<LogitRows> sets;
  for (int vocab : {5, 64, 200, 3001, 32000}) {
    std::mt19937 rng(static_cast<uint32_t>(vocab));
    std::normal_distribution<float> normal(0.0f, 3.0f);
    LogitRows s{"vocab " + std::to_string(vocab), vocab, {}};
    auto row = [&](auto value) {
      for (int i = 0; i < vocab; ++i) s.logits.push_back(value(i));
    };
    row([&](int) { return normal(rng); });                                      // distinct
    row([&](int) { return std::round(normal(rng)); });                          // many ties, at the cut too
    row([&](int i) { return i % 7 == 1 ? 0.0f : (i % 7 == 0 ? -0.0f : -1.0f); });  // -0 and +0 tie
    row([&](int i) { return i % 97 == 3 ? normal(rng) : -kInf; });              // few finite, then -inf by id
    row([&](int) { return -kInf; });                                            // none finite
    row([&](int i) { return i == vocab / 2 ? 7.0f : std::round(normal(rng) * 4) / 4; });
    // Refused rows: the lowest id of a NaN or +inf is reported.
    row([&](int i) { return i == vocab - 1 ? std::numeric_limits<float>::quiet_NaN() : (i == vocab / 3 ? kInf : 1.0f); });
    row([&](int i) { return i == vocab / 2 ? -std::numeric_limits<float>::quiet_NaN() : normal(rng); });
    sets.push_back(std::move(s));
  }
  return sets;
}

// The reference for one row: sort all of it in the sampler's order, count,
// and sum as daemon/sampling/logprobs.cc does (kernels/sum_exp.h).
inline TopLogitsRow HostTopLogits(const float* row, int vocab) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  TopLogitsRow out{};
  out.bad_id = -1;
  float max_logit = -kInf;
  for (int i = 0; i < vocab; ++i) {
    if (std::isnan(row[i]) || row[i] == kInf) {
      if (out.bad_id < 0) {
        out.bad_id = i;
        out.bad_logit = row[i];
      }
      continue;
    }
    out.n_finite += row[i] != -kInf;
    max_logit = std::max(max_logit, row[i]);
  }
  if (out.bad_id >= 0) return out;
  std::vector<TopLogit> all;
  for (int i = 0; i < vocab; ++i) all.push_back({i, row[i]});
  std::sort(all.begin(), all.end(), [](const TopLogit& a, const TopLogit& b) {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
  });
  std::copy_n(all.begin(), std::min(vocab, kTopLogits), out.top);
  out.max_logit = max_logit;
  out.sum_exp = max_logit != -kInf ? SumExpInOrder(row, vocab, max_logit) : 0.0;
  return out;
}

// Bit equality of what ops.h specifies for a row (top and the sums only when
// it has no NaN or +inf), the sum of exps within sum_tolerance relative (0:
// bit for bit).
inline void ExpectSameRow(const TopLogitsRow& got, const TopLogitsRow& want, int vocab, const std::string& what,
                          double sum_tolerance = 0) {
  EXPECT_EQ(got.n_finite, want.n_finite) << what;
  EXPECT_EQ(got.bad_id, want.bad_id) << what;
  EXPECT_EQ(std::bit_cast<uint32_t>(got.bad_logit), std::bit_cast<uint32_t>(want.bad_logit)) << what;
  if (want.bad_id >= 0) return;
  EXPECT_EQ(std::bit_cast<uint32_t>(got.max_logit), std::bit_cast<uint32_t>(want.max_logit)) << what;
  if (sum_tolerance == 0) {
    EXPECT_EQ(std::bit_cast<uint64_t>(got.sum_exp), std::bit_cast<uint64_t>(want.sum_exp)) << what;
  } else {
    EXPECT_NEAR(got.sum_exp, want.sum_exp, sum_tolerance * want.sum_exp) << what;
  }
  for (int j = 0; j < std::min(vocab, kTopLogits); ++j) {
    EXPECT_EQ(got.top[j].id, want.top[j].id) << what << " rank " << j;
    EXPECT_EQ(std::bit_cast<uint32_t>(got.top[j].logit), std::bit_cast<uint32_t>(want.top[j].logit))
        << what << " rank " << j;
  }
}

}  // namespace octo::testing
