// cpu::TopLogits against a sort of the whole row: the same candidates in the
// sampler's order, the same count and bad entry, and the sum of
// daemon/sampling/logprobs.cc bit for bit; and that sum's order
// (kernels/sum_exp.h) against a plain sum.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/ops.h"
#include "kernels/sum_exp.h"
#include "tests/kernels/top_logits_test_util.h"

namespace octo {
namespace {

TEST(TopLogitsTest, MatchesASortOfTheRow) {
  for (const testing::LogitRows& s : testing::TopLogitsTestRows()) {
    std::vector<TopLogitsRow> got(s.rows());
    ASSERT_TRUE(cpu::TopLogits(s.logits.data(), s.rows(), s.vocab, got.data()).ok());
    for (int r = 0; r < s.rows(); ++r) {
      const TopLogitsRow want = testing::HostTopLogits(s.logits.data() + static_cast<size_t>(r) * s.vocab, s.vocab);
      testing::ExpectSameRow(got[r], want, s.vocab, s.what + " row " + std::to_string(r));
    }
  }
}

// The refused rows name their lowest bad id; an all -inf row ranks by id.
TEST(TopLogitsTest, BadAndEmptyRows) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const int vocab = 100;
  std::vector<float> logits(3 * vocab, -kInf);
  logits[40] = kInf;
  logits[70] = std::numeric_limits<float>::quiet_NaN();
  logits[vocab + 10] = 2.0f;
  std::vector<TopLogitsRow> out(3);
  ASSERT_TRUE(cpu::TopLogits(logits.data(), 3, vocab, out.data()).ok());
  EXPECT_EQ(out[0].bad_id, 40);
  EXPECT_EQ(out[0].bad_logit, kInf);
  EXPECT_EQ(out[1].bad_id, -1);
  EXPECT_EQ(out[1].n_finite, 1);
  EXPECT_EQ(out[1].top[0].id, 10);
  EXPECT_EQ(out[1].top[1].id, 0);
  EXPECT_EQ(out[1].sum_exp, 1.0);
  EXPECT_EQ(out[2].n_finite, 0);
  EXPECT_EQ(out[2].max_logit, -kInf);
  EXPECT_EQ(out[2].sum_exp, 0.0);
  for (int j = 0; j < kTopLogits; ++j) EXPECT_EQ(out[2].top[j].id, j);
}

// The one order's sum is the sum: within 1e-13 relative of a long double
// sum in id order, at widths below, at and past a block of lanes; and for a
// row of at most one warp it is the butterfly's association.
TEST(SumExpTest, IsTheSumOfTheRowsExps) {
  for (size_t n : {1, 5, 32, 33, 1000, 1024, 1025, 128256}) {
    std::vector<float> row(n);
    for (size_t i = 0; i < n; ++i) row[i] = static_cast<float>((i * 7919) % 1000) / 53.0f - 9.0f;
    const float max = *std::max_element(row.begin(), row.end());
    long double want = 0;
    for (float x : row) want += std::exp(static_cast<long double>(x) - max);
    const double got = SumExpInOrder(row.data(), n, max);
    EXPECT_NEAR(got, static_cast<double>(want), 1e-13 * static_cast<double>(want)) << "n " << n;
  }
  const std::vector<float> three = {0.5f, -1.0f, 0.25f};
  const double e0 = std::exp(0.0), e1 = std::exp(-1.5), e2 = std::exp(-0.25);
  // Lanes 0, 1, 2 hold them, the other 29 zeros: offset 16 and 8 add zeros,
  // 4 too, 2 gives lane 0 e0 + e2, 1 adds lane 1's e1 + 0.
  EXPECT_EQ(SumExpInOrder(three.data(), 3, 0.5f), (e0 + e2) + e1);
}

TEST(TopLogitsTest, RejectsBadArguments) {
  std::vector<float> logits(8, 0.0f);
  TopLogitsRow out;
  const auto expect_rejected = [](const absl::Status& s, const std::string& needle) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s;
  };
  expect_rejected(cpu::TopLogits(nullptr, 1, 8, &out), "logits is null");
  expect_rejected(cpu::TopLogits(logits.data(), 1, 8, nullptr), "out is null");
  expect_rejected(cpu::TopLogits(logits.data(), 0, 8, &out), "n_rows (0)");
  expect_rejected(cpu::TopLogits(logits.data(), 1, 0, &out), "vocab (0)");
}

}  // namespace
}  // namespace octo
