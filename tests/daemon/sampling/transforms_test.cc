// Each step of the sampling chain on its own, against small examples worked
// out by hand in the comments.
#include "daemon/sampling/transforms.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace octo {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<int32_t> Ids(const std::vector<TokenLogit>& candidates) {
  std::vector<int32_t> ids;
  for (const TokenLogit& c : candidates) ids.push_back(c.id);
  return ids;
}

std::vector<int32_t> SortedIds(const std::vector<TokenLogit>& candidates) {
  std::vector<int32_t> ids = Ids(candidates);
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Candidates 0..n-1 whose softmax is exactly `probabilities` (logit = ln p).
std::vector<TokenLogit> FromProbabilities(const std::vector<double>& probabilities) {
  std::vector<TokenLogit> candidates;
  for (size_t i = 0; i < probabilities.size(); ++i) {
    candidates.push_back({static_cast<int32_t>(i), static_cast<float>(std::log(probabilities[i]))});
  }
  return candidates;
}

std::vector<double> Softmax(const std::vector<TokenLogit>& candidates) {
  double max_logit = kNegInf;
  for (const TokenLogit& c : candidates) max_logit = std::max<double>(max_logit, c.logit);
  std::vector<double> p;
  double total = 0;
  for (const TokenLogit& c : candidates) total += std::exp(c.logit - max_logit);
  for (const TokenLogit& c : candidates) p.push_back(std::exp(c.logit - max_logit) / total);
  return p;
}

TEST(ArgmaxTest, LargestLogitWinsAndTiesGoToLowestId) {
  EXPECT_EQ(ArgmaxLowestId(std::vector<float>{1, 3, 2}), 1);
  EXPECT_EQ(ArgmaxLowestId(std::vector<float>{1, 3, 3, 2}), 1);
  EXPECT_EQ(ArgmaxLowestId(std::vector<float>{-5, -2, -2}), 1);
  EXPECT_EQ(ArgmaxLowestId(std::vector<float>{kNegInf, -100}), 1);
}

TEST(ArgmaxTest, NothingToChoose) {
  EXPECT_EQ(ArgmaxLowestId(std::vector<float>{}), -1);
  EXPECT_EQ(ArgmaxLowestId(std::vector<float>{kNegInf, kNegInf}), -1);
}

// logits {2, -1, 0.5, 3, 0}, window {0, 1, 0, 3, 4}: token 0 seen twice,
// tokens 1, 3, 4 once, token 2 never.
class PenaltiesTest : public ::testing::Test {
 protected:
  std::vector<float> logits_{2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
  const std::vector<int32_t> window_{0, 1, 0, 3, 4};
};

TEST_F(PenaltiesTest, RepeatDividesPositiveAndMultipliesNegative) {
  ASSERT_TRUE(ApplyPenalties(logits_, window_, 2.0, 0, 0).ok());
  // 2/2 (once, though seen twice), -1*2, untouched, 3/2, 0*2.
  EXPECT_EQ(logits_, (std::vector<float>{1.0f, -2.0f, 0.5f, 1.5f, 0.0f}));
}

TEST_F(PenaltiesTest, FrequencyCountsAndPresenceDoesNot) {
  ASSERT_TRUE(ApplyPenalties(logits_, window_, 1.0, 0.5, 0.25).ok());
  // Subtract count * 0.5 + 0.25: token 0 loses 1.25, tokens 1, 3, 4 lose 0.75.
  EXPECT_EQ(logits_, (std::vector<float>{0.75f, -1.75f, 0.5f, 2.25f, -0.75f}));
}

TEST_F(PenaltiesTest, RepeatThenFrequencyAndPresence) {
  ASSERT_TRUE(ApplyPenalties(logits_, window_, 2.0, 0.5, 0.25).ok());
  // {1, -2, 0.5, 1.5, 0} then minus {1.25, 0.75, 0, 0.75, 0.75}.
  EXPECT_EQ(logits_, (std::vector<float>{-0.25f, -2.75f, 0.5f, 0.75f, -0.75f}));
}

TEST_F(PenaltiesTest, NegativePenaltiesEncourageRepeats) {
  ASSERT_TRUE(ApplyPenalties(logits_, window_, 1.0, -0.5, 0).ok());
  EXPECT_EQ(logits_, (std::vector<float>{3.0f, -0.5f, 0.5f, 3.5f, 0.5f}));
}

TEST_F(PenaltiesTest, EmptyWindowOrNeutralPenaltiesChangeNothing) {
  const std::vector<float> before = logits_;
  ASSERT_TRUE(ApplyPenalties(logits_, {}, 2.0, 0.5, 0.5).ok());
  ASSERT_TRUE(ApplyPenalties(logits_, window_, 1.0, 0, 0).ok());
  EXPECT_EQ(logits_, before);
}

TEST_F(PenaltiesTest, IdOutsideVocabularyIsRejectedAndNothingChanges) {
  const std::vector<float> before = logits_;
  const std::vector<int32_t> window = {0, 5};
  const absl::Status status = ApplyPenalties(logits_, window, 2.0, 0, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("token 5"), std::string::npos) << status;
  EXPECT_EQ(logits_, before);
}

TEST(TopKTest, KeepsTheKMostLikely) {
  std::vector<TokenLogit> c = {{0, 1}, {1, 4}, {2, 3}, {3, 4.5f}, {4, 2}};
  KeepTopK(c, 3);
  EXPECT_EQ(SortedIds(c), (std::vector<int32_t>{1, 2, 3}));
}

TEST(TopKTest, TieAtTheCutGoesToLowerIds) {
  std::vector<TokenLogit> c = {{0, 2}, {1, 2}, {2, 5}, {3, 2}};
  KeepTopK(c, 2);
  EXPECT_EQ(SortedIds(c), (std::vector<int32_t>{0, 2}));
}

// Both ways of selecting (a heap for small k, nth_element for large) leave
// the survivors in MoreLikely order: the candidates path rebuilds this list.
TEST(TopKTest, SurvivorsAreInMoreLikelyOrder) {
  for (int32_t k : {2, 40}) {
    std::vector<TokenLogit> c;
    for (int32_t i = 0; i < 64; ++i) c.push_back({i, static_cast<float>((i * 37) % 11)});
    KeepTopK(c, k);
    ASSERT_EQ(c.size(), static_cast<size_t>(k));
    EXPECT_TRUE(std::is_sorted(c.begin(), c.end(), MoreLikely)) << "k " << k;
  }
}

TEST(TopKTest, ZeroOrLargeKIsOff) {
  std::vector<TokenLogit> c = {{0, 1}, {1, 2}, {2, 3}};
  KeepTopK(c, 0);
  EXPECT_EQ(c.size(), 3u);
  KeepTopK(c, 3);
  EXPECT_EQ(c.size(), 3u);
  KeepTopK(c, 100);
  EXPECT_EQ(c.size(), 3u);
}

// Probabilities by id: 0.15, 0.5, 0.1, 0.25. In order of likelihood: id 1
// (0.5), id 3 (cumulative 0.75), id 0 (0.90), id 2 (1.0).
std::vector<TokenLogit> NucleusExample() { return FromProbabilities({0.15, 0.5, 0.1, 0.25}); }

TEST(TopPTest, KeepsUpToTheTokenThatReachesP) {
  std::vector<TokenLogit> c = NucleusExample();
  KeepTopP(c, 0.4);  // 0.5 >= 0.4 already
  EXPECT_EQ(Ids(c), (std::vector<int32_t>{1}));
  c = NucleusExample();
  KeepTopP(c, 0.7);  // 0.5 < 0.7 <= 0.75
  EXPECT_EQ(Ids(c), (std::vector<int32_t>{1, 3}));
  c = NucleusExample();
  KeepTopP(c, 0.8);  // 0.75 < 0.8 <= 0.90
  EXPECT_EQ(Ids(c), (std::vector<int32_t>{1, 3, 0}));
  c = NucleusExample();
  KeepTopP(c, 0.95);
  EXPECT_EQ(Ids(c), (std::vector<int32_t>{1, 3, 0, 2}));
}

TEST(TopPTest, OneIsOff) {
  std::vector<TokenLogit> c = NucleusExample();
  KeepTopP(c, 1.0);
  EXPECT_EQ(Ids(c), (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(TopPTest, NormalisesOverTheCurrentCandidatesOnly) {
  // After top-k 2 of the example only ids 1 and 3 remain: 0.5/0.75 = 0.667
  // >= 0.6, so top-p 0.6 keeps id 1 alone (over all four it would need two).
  std::vector<TokenLogit> c = NucleusExample();
  KeepTopK(c, 2);
  KeepTopP(c, 0.6);
  EXPECT_EQ(Ids(c), (std::vector<int32_t>{1}));
}

// The chunked partial sort against a plain full sort, on a vocabulary big
// enough that the nucleus needs several chunks, with many equal logits.
TEST(TopPTest, MatchesAFullSortOnALargeVocabulary) {
  std::mt19937 gen(7);
  std::vector<TokenLogit> vocab;
  for (int32_t i = 0; i < 20000; ++i) vocab.push_back({i, static_cast<float>(gen() % 400) / 100.0f});
  for (double p : {0.05, 0.3, 0.9, 0.999}) {
    std::vector<TokenLogit> expected = vocab;
    float max_logit = kNegInf;
    for (const TokenLogit& t : expected) max_logit = std::max(max_logit, t.logit);
    double total = 0;
    for (const TokenLogit& t : expected) total += std::exp(static_cast<double>(t.logit) - max_logit);
    std::sort(expected.begin(), expected.end(), MoreLikely);
    double cumulative = 0;
    size_t keep = expected.size();
    for (size_t i = 0; i < expected.size(); ++i) {
      cumulative += std::exp(static_cast<double>(expected[i].logit) - max_logit);
      if (cumulative >= p * total) {
        keep = i + 1;
        break;
      }
    }
    expected.resize(keep);

    std::vector<TokenLogit> actual = vocab;
    KeepTopP(actual, p);
    EXPECT_GT(actual.size(), 64u) << "p " << p << ": the example should need more than one chunk";
    EXPECT_EQ(Ids(actual), Ids(expected)) << "p " << p;
  }
}

// The fused step the Sampler runs equals top-p followed by min-p, order
// included, whichever of the two cuts deeper.
TEST(TopPThenMinPTest, EqualsTheTwoStepsInTurn) {
  std::mt19937 gen(11);
  for (int round = 0; round < 40; ++round) {
    std::vector<TokenLogit> vocab;
    const size_t n = 1 + gen() % 3000;
    const float spread = static_cast<float>(1 + gen() % 20);
    for (size_t i = 0; i < n; ++i) {
      vocab.push_back({static_cast<int32_t>(i), spread * static_cast<float>(gen() % 1000) / 1000.0f});
    }
    for (double p : {0.1, 0.6, 0.95, 1.0}) {
      for (double min_p : {0.0, 0.01, 0.2, 0.9}) {
        std::vector<TokenLogit> expected = vocab;
        KeepTopP(expected, p);
        KeepMinP(expected, min_p);
        std::vector<TokenLogit> actual = vocab;
        KeepTopPThenMinP(actual, p, min_p);
        EXPECT_EQ(Ids(actual), Ids(expected)) << "p " << p << " min_p " << min_p << " n " << n;
      }
    }
  }
}

TEST(MinPTest, KeepsTokensWithinAFactorOfTheBest) {
  // Best is 0.5; min_p 0.4 keeps p >= 0.2: ids 1 (0.5) and 3 (0.25).
  std::vector<TokenLogit> c = NucleusExample();
  KeepMinP(c, 0.4);
  EXPECT_EQ(Ids(c), (std::vector<int32_t>{1, 3}));
  // min_p 0.25 keeps p >= 0.125: also id 0 (0.15); order is kept.
  c = NucleusExample();
  KeepMinP(c, 0.25);
  EXPECT_EQ(Ids(c), (std::vector<int32_t>{0, 1, 3}));
}

TEST(MinPTest, OneKeepsOnlyTheBestAndZeroIsOff) {
  std::vector<TokenLogit> c = NucleusExample();
  KeepMinP(c, 1.0);
  EXPECT_EQ(Ids(c), (std::vector<int32_t>{1}));
  c = NucleusExample();
  KeepMinP(c, 0.0);
  EXPECT_EQ(c.size(), 4u);
}

TEST(TemperatureTest, ScalesTheLogits) {
  // Logits {0, ln 2}: probabilities 1:2. At T = 0.5 they become 1:4, at T = 2 1:sqrt(2).
  std::vector<TokenLogit> c = {{0, 0.0f}, {1, static_cast<float>(std::log(2.0))}};
  ApplyTemperature(c, 0.5);
  std::vector<double> p = Softmax(c);
  EXPECT_NEAR(p[0], 0.2, 1e-6);
  EXPECT_NEAR(p[1], 0.8, 1e-6);

  c = {{0, 0.0f}, {1, static_cast<float>(std::log(2.0))}};
  ApplyTemperature(c, 2.0);
  p = Softmax(c);
  EXPECT_NEAR(p[1] / p[0], std::sqrt(2.0), 1e-6);
}

TEST(TemperatureTest, TinyTemperatureDoesNotOverflow) {
  std::vector<TokenLogit> c = {{0, 5.0f}, {1, 4.0f}};
  ApplyTemperature(c, 1e-40);
  EXPECT_EQ(c[0].logit, 0.0f);
  EXPECT_EQ(c[1].logit, kNegInf);
  EXPECT_EQ(DrawToken(c, 0.999), 0);
}

TEST(DrawTest, WalksTheCumulativeDistributionInIdOrder) {
  // Given most likely first; drawn in id order: id 0 [0, 0.25), id 1
  // [0.25, 0.5), id 2 [0.5, 1).
  const std::vector<TokenLogit> example = {{2, static_cast<float>(std::log(0.5))},
                                           {0, static_cast<float>(std::log(0.25))},
                                           {1, static_cast<float>(std::log(0.25))}};
  for (const auto& [u, expected] : std::vector<std::pair<double, int32_t>>{
           {0.0, 0}, {0.1, 0}, {0.3, 1}, {0.49, 1}, {0.51, 2}, {0.999999, 2}}) {
    std::vector<TokenLogit> c = example;
    EXPECT_EQ(DrawToken(c, u), expected) << "u " << u;
  }
}

TEST(DrawTest, MaskedTokensAreNeverDrawn) {
  std::vector<TokenLogit> c = {{0, kNegInf}, {1, 0.0f}, {2, kNegInf}};
  EXPECT_EQ(DrawToken(c, 0.0), 1);
  EXPECT_EQ(DrawToken(c, 0.999999), 1);
  c = {{0, kNegInf}};
  EXPECT_EQ(DrawToken(c, 0.5), -1);
  c.clear();
  EXPECT_EQ(DrawToken(c, 0.5), -1);
}

}  // namespace
}  // namespace octo
