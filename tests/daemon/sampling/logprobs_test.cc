#include "daemon/sampling/logprobs.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace octo {
namespace {

TEST(LogprobsTest, LogSoftmaxOfTheRawLogits) {
  const std::vector<float> logits = {1, 2, 3};
  const double log_sum = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_NEAR(Logprob(logits, 0).value(), 1 - log_sum, 1e-12);
  EXPECT_NEAR(Logprob(logits, 2).value(), 3 - log_sum, 1e-12);

  const std::vector<TokenLogprob> top = TopLogprobs(logits, 2).value();
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].id, 2);
  EXPECT_NEAR(top[0].logprob, 3 - log_sum, 1e-12);
  EXPECT_EQ(top[1].id, 1);
  EXPECT_NEAR(top[1].logprob, 2 - log_sum, 1e-12);
}

TEST(LogprobsTest, AllOfThemSumToOneInOrder) {
  std::vector<float> logits;
  for (int i = 0; i < 1000; ++i) logits.push_back(static_cast<float>((i * 7919) % 1000) / 97.0f);
  const std::vector<TokenLogprob> all = TopLogprobs(logits, 5000).value();
  ASSERT_EQ(all.size(), logits.size());  // n beyond the vocabulary gives all of it
  double total = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    total += std::exp(all[i].logprob);
    EXPECT_LE(all[i].logprob, 0.0);
    if (i > 0) {
      EXPECT_LE(all[i].logprob, all[i - 1].logprob);
    }
  }
  EXPECT_NEAR(total, 1.0, 1e-9);
}

TEST(LogprobsTest, TiesAreOrderedById) {
  const std::vector<TokenLogprob> top = TopLogprobs(std::vector<float>{1, 5, 5, 0, 5}, 3).value();
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].id, 1);
  EXPECT_EQ(top[1].id, 2);
  EXPECT_EQ(top[2].id, 4);
  EXPECT_DOUBLE_EQ(top[0].logprob, top[2].logprob);
}

TEST(LogprobsTest, LargeLogitsDoNotOverflow) {
  const std::vector<float> logits = {1000.0f, 1000.0f, -1000.0f};
  EXPECT_NEAR(Logprob(logits, 0).value(), -std::log(2.0), 1e-12);
  EXPECT_NEAR(Logprob(logits, 2).value(), -2000 - std::log(2.0), 1e-9);
}

TEST(LogprobsTest, MaskedTokenHasMinusInfinity) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(Logprob(std::vector<float>{0, neg_inf}, 1).value(), -std::numeric_limits<double>::infinity());
}

TEST(LogprobsTest, ZeroAsksForNothing) { EXPECT_TRUE(TopLogprobs(std::vector<float>{1, 2}, 0).value().empty()); }

TEST(LogprobsTest, BadInputsAreRejected) {
  const std::vector<float> logits = {1, 2};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float neg_inf = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(TopLogprobs(logits, -1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TopLogprobs(std::vector<float>{}, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TopLogprobs(std::vector<float>{1, nan}, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TopLogprobs(std::vector<float>{neg_inf}, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Logprob(logits, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Logprob(logits, -1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace octo
