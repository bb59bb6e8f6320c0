// Speculative sampling's verification (daemon/sampling/speculative.h): the
// greedy rule token for token, and the output distribution of sampling by
// rejection against the target's by chi-square over many seeded rounds, at
// significance 0.001, with the same test shown to catch two wrong verifiers.
#include "daemon/sampling/speculative.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "daemon/sampling/rng.h"
#include "daemon/sampling/sampler.h"
#include "gtest/gtest.h"

namespace octo {
namespace {

using Dist = std::vector<TokenProb>;

Dist Of(Sampler& sampler, const std::vector<float>& logits) {
  absl::StatusOr<Dist> d = sampler.Distribution(logits, {});
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : Dist{};
}

Sampler Make(double temperature, int top_k, uint64_t seed) {
  SamplingParams params;
  params.temperature = temperature;
  params.top_k = top_k;
  params.top_p = 1.0;
  params.min_p = 0.0;
  params.seed = seed;
  return *Sampler::Create(params);
}

// Pearson's chi-square of `counts` (over n draws) against `dist`; +inf when
// a token outside dist's support was drawn.
double ChiSquare(const std::map<int32_t, int>& counts, const Dist& dist, int n) {
  double chi = 0;
  for (const auto& [id, c] : counts) {
    if (ProbabilityOf(dist, id) == 0) return INFINITY;
  }
  for (const TokenProb& t : dist) {
    const auto it = counts.find(t.id);
    const double observed = it == counts.end() ? 0 : it->second, expected = n * t.p;
    chi += (observed - expected) * (observed - expected) / expected;
  }
  return chi;
}

// The chi-square distribution's 0.999 quantile, by degrees of freedom.
double Critical(size_t df) {
  static const double kQuantile[] = {0, 10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322, 26.124};
  return kQuantile[df];
}

TEST(SpeculativeTest, GreedyKeepsTheDraftUpToTheTargetsFirstOtherArgmaxThenGivesThat) {
  auto point = [](int32_t id) { return Dist{{id, 1.0}}; };
  SplitMix64 rng(7);
  const auto uniform = [&] { return rng.NextDouble(); };
  const std::vector<int32_t> draft = {3, 5, 7};
  const std::vector<Dist> q = {point(3), point(5), point(7)};
  absl::StatusOr<SpeculativeOutcome> out = VerifyDraft(draft, q, std::vector<Dist>{point(3), point(5), point(2), point(9)}, uniform);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->accepted, 2);
  EXPECT_EQ(out->next, 2) << "the target's own token follows the kept prefix";
  out = VerifyDraft(draft, q, std::vector<Dist>{point(3), point(5), point(7), point(9)}, uniform);
  EXPECT_EQ(out->accepted, 3);
  EXPECT_EQ(out->next, 9) << "all kept: the target's token after them";
  out = VerifyDraft(draft, q, std::vector<Dist>{point(4), point(5), point(7), point(9)}, uniform);
  EXPECT_EQ(out->accepted, 0);
  EXPECT_EQ(out->next, 4);
}

TEST(SpeculativeTest, SamplingByRejectionKeepsTheTargetsDistribution) {
  // Two target positions (temperature 0.8, top-k 6 of 8, so two tokens can
  // never appear) and a draft that knows neither truncation nor the right
  // shape (temperature 1, all 8 tokens).
  Sampler target = Make(0.8, 6, 1), draft_sampler = Make(1.0, 0, 2);
  const Dist p0 = Of(target, {1.0f, 2.5f, 0.2f, -1.0f, 1.8f, 0.7f, 2.2f, -0.3f});
  const Dist p1 = Of(target, {0.3f, -0.5f, 1.4f, 2.0f, 0.1f, 1.1f, -2.0f, 0.9f});
  const Dist p2 = Of(target, {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f, 3.0f, 3.5f});
  const Dist q0 = Of(draft_sampler, {2.0f, 0.5f, 1.0f, 0.0f, 2.2f, -1.0f, 0.4f, 1.5f});
  const Dist q1 = Of(draft_sampler, {0.3f, 0.5f, 1.2f, 1.0f, 0.4f, 1.3f, 0.2f, 0.9f});
  ASSERT_EQ(p0.size(), 6u);
  ASSERT_EQ(q0.size(), 8u);
  const std::vector<Dist> q = {q0, q1}, p = {p0, p1, p2};

  const int rounds = 40000;
  SplitMix64 rng(12345);
  const auto uniform = [&] { return rng.NextDouble(); };
  std::map<int32_t, int> first, second, draft_only, wrong_residual;
  int second_n = 0, kept = 0;
  for (int r = 0; r < rounds; ++r) {
    const std::vector<int32_t> draft = {DrawFrom(q0, rng.NextDouble()), DrawFrom(q1, rng.NextDouble())};
    absl::StatusOr<SpeculativeOutcome> out = VerifyDraft(draft, q, p, uniform);
    ASSERT_TRUE(out.ok()) << out.status();
    kept += out->accepted;
    ++first[out->accepted >= 1 ? draft[0] : out->next];
    if (out->accepted >= 1) {
      ++second[out->accepted >= 2 ? draft[1] : out->next];
      ++second_n;
    }
    // Two wrong verifiers on the same draws: keep every draft token; or on
    // a refusal draw from p instead of the residual.
    ++draft_only[draft[0]];
    ++wrong_residual[out->accepted >= 1 ? draft[0] : DrawFrom(p0, rng.NextDouble())];
  }
  const double chi_first = ChiSquare(first, p0, rounds), chi_second = ChiSquare(second, p1, second_n);
  std::printf("chi-square, first token %.2f, second %.2f (df %zu, 0.001 critical %.2f; %d second tokens); "
              "acceptance %.3f; wrong verifiers: draft only %.1f, no residual %.1f\n",
              chi_first, chi_second, p0.size() - 1, Critical(p0.size() - 1), second_n, kept / (2.0 * rounds),
              ChiSquare(draft_only, p0, rounds), ChiSquare(wrong_residual, p0, rounds));
  EXPECT_LT(chi_first, Critical(p0.size() - 1));
  EXPECT_LT(chi_second, Critical(p1.size() - 1));
  EXPECT_GT(ChiSquare(draft_only, p0, rounds), Critical(p0.size() - 1)) << "the test must see a draft-only output";
  EXPECT_GT(ChiSquare(wrong_residual, p0, rounds), Critical(p0.size() - 1)) << "and a refusal drawn from p";
}

TEST(SpeculativeTest, TheSamplersDistributionIsWhatItDrawsFrom) {
  Sampler sampler = Make(0.7, 4, 99);
  const std::vector<float> logits = {0.5f, 1.5f, -0.5f, 2.0f, 1.0f, 0.0f};
  const Dist d = Of(sampler, logits);
  ASSERT_EQ(d.size(), 4u) << "top-k 4";
  // Hand-computed: softmax of the top 4 logits over 0.7, ascending ids.
  const int ids[] = {0, 1, 3, 4};
  double total = 0;
  for (int id : ids) total += std::exp(logits[id] / 0.7);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(d[i].id, ids[i]);
    EXPECT_NEAR(d[i].p, std::exp(logits[ids[i]] / 0.7) / total, 1e-7) << "the scaled logits are floats";
  }
  std::map<int32_t, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[*sampler.Sample(logits, {})];
  EXPECT_LT(ChiSquare(counts, d, n), Critical(d.size() - 1));
  Sampler greedy = Make(0.0, 0, 1);
  const Dist g = Of(greedy, logits);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].id, 3);
  EXPECT_EQ(g[0].p, 1.0);
}

TEST(SpeculativeTest, MismatchedSizesAndImpossibleDraftsAreNamed) {
  SplitMix64 rng(1);
  const auto uniform = [&] { return rng.NextDouble(); };
  const Dist a = {{1, 0.5}, {2, 0.5}};
  const std::vector<int32_t> draft = {3};
  EXPECT_NE(VerifyDraft(draft, std::vector<Dist>{a}, std::vector<Dist>{a}, uniform).status().message().find(
                "one more target distribution (got 1)"),
            std::string::npos);
  EXPECT_NE(VerifyDraft(draft, std::vector<Dist>{a}, std::vector<Dist>{a, a}, uniform).status().message().find(
                "draft token 3 at 0 has draft probability 0"),
            std::string::npos);
}

}  // namespace
}  // namespace octo
