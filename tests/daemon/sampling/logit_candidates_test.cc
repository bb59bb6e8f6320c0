// The candidates path against the whole row: for rows reduced as
// Backend::TopLogits reduces them (here by a sort, the sum in
// kernels/sum_exp.h's order as the CPU backend's), the sampler draws the same tokens with the same
// generator steps, logprobs are bit for bit the same, errors the same; and
// CandidatesDecide says no wherever they could differ.
#include "daemon/sampling/logit_candidates.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "daemon/sampling/logprobs.h"
#include "daemon/sampling/sampler.h"
#include "kernels/sum_exp.h"

namespace octo {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The row as TopLogits (kernels/ops.h) gives it.
LogitCandidates Reduce(const std::vector<float>& row) {
  LogitCandidates c;
  c.vocab = row.size();
  float max_logit = -kInf;
  for (size_t i = 0; i < row.size(); ++i) {
    if (std::isnan(row[i]) || row[i] == kInf) {
      if (c.bad_id < 0) {
        c.bad_id = static_cast<int32_t>(i);
        c.bad_logit = row[i];
      }
      continue;
    }
    c.n_finite += row[i] != -kInf;
    max_logit = std::max(max_logit, row[i]);
  }
  if (c.bad_id >= 0) return c;
  std::vector<TokenLogit> all;
  for (size_t i = 0; i < row.size(); ++i) all.push_back({static_cast<int32_t>(i), row[i]});
  std::sort(all.begin(), all.end(), MoreLikely);
  c.top.assign(all.begin(), all.begin() + std::min<size_t>(all.size(), kLogitCandidates));
  c.max_logit = max_logit;
  if (max_logit != -kInf) c.sum_exp = SumExpInOrder(row.data(), row.size(), max_logit);
  return c;
}

// Rows of a few widths: distinct logits, many ties, few finite ones.
std::vector<std::vector<float>> Rows() {
  std::vector<std::vector<float>> rows;
  for (size_t vocab : {3, 40, 100, 1000, 20000}) {
    std::mt19937 rng(static_cast<uint32_t>(vocab));
    std::normal_distribution<float> normal(0.0f, 2.5f);
    std::vector<float> distinct(vocab), ties(vocab), sparse(vocab, -kInf);
    for (size_t i = 0; i < vocab; ++i) {
      distinct[i] = normal(rng);
      ties[i] = std::round(normal(rng));
      if (i % 13 == 2) sparse[i] = normal(rng);
    }
    rows.push_back(distinct);
    rows.push_back(ties);
    rows.push_back(sparse);
  }
  return rows;
}

std::vector<SamplingParams> DecidedParams() {
  std::vector<SamplingParams> all;
  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.top_k = 0;
  greedy.top_logprobs = 5;
  all.push_back(greedy);
  for (int32_t k : {1, 5, 17, 40, kLogitCandidates}) {
    for (double top_p : {1.0, 0.9, 0.5}) {
      for (double min_p : {0.0, 0.05}) {
        SamplingParams p;
        p.temperature = k % 2 == 0 ? 0.7 : 1.3;
        p.top_k = k;
        p.top_p = top_p;
        p.min_p = min_p;
        p.top_logprobs = 3;
        p.repeat_penalty = 1.3;
        p.repeat_last_n = 0;  // penalties off by their window
        all.push_back(p);
      }
    }
  }
  return all;
}

void ExpectSameLogprobs(const std::vector<float>& row, const LogitCandidates& c, int32_t id, int n,
                        const std::string& what) {
  const absl::StatusOr<double> whole = Logprob(row, id);
  const absl::StatusOr<double> reduced = Logprob(c, id);
  ASSERT_TRUE(whole.ok() && reduced.ok()) << what << whole.status() << reduced.status();
  EXPECT_EQ(std::bit_cast<uint64_t>(*whole), std::bit_cast<uint64_t>(*reduced)) << what;
  const auto whole_top = TopLogprobs(row, n);
  const auto reduced_top = TopLogprobs(c, n);
  ASSERT_TRUE(whole_top.ok() && reduced_top.ok()) << what;
  ASSERT_EQ(whole_top->size(), reduced_top->size()) << what;
  for (size_t j = 0; j < whole_top->size(); ++j) {
    EXPECT_EQ((*whole_top)[j].id, (*reduced_top)[j].id) << what << " alternative " << j;
    EXPECT_EQ(std::bit_cast<uint64_t>((*whole_top)[j].logprob), std::bit_cast<uint64_t>((*reduced_top)[j].logprob))
        << what << " alternative " << j;
  }
}

TEST(LogitCandidatesTest, SameTokensAndLogprobsAsTheWholeRow) {
  const std::vector<std::vector<float>> rows = Rows();
  const std::vector<SamplingParams> params = DecidedParams();
  for (size_t p = 0; p < params.size(); ++p) {
    SamplingParams sp = params[p];
    sp.seed = 1000 + p;
    ASSERT_TRUE(CandidatesDecide(sp)) << "params " << p;
    absl::StatusOr<Sampler> whole = Sampler::Create(sp);
    absl::StatusOr<Sampler> reduced = Sampler::Create(sp);
    ASSERT_TRUE(whole.ok() && reduced.ok());
    for (size_t r = 0; r < rows.size(); ++r) {
      const LogitCandidates c = Reduce(rows[r]);
      for (int draw = 0; draw < 4; ++draw) {
        const std::string what = "params " + std::to_string(p) + " row " + std::to_string(r) + " draw " +
                                 std::to_string(draw) + ": ";
        const absl::StatusOr<int32_t> a = whole->Sample(rows[r], {});
        const absl::StatusOr<int32_t> b = reduced->Sample(c);
        ASSERT_TRUE(a.ok() && b.ok()) << what << a.status() << b.status();
        ASSERT_EQ(*a, *b) << what;
        ExpectSameLogprobs(rows[r], c, *a, sp.top_logprobs, what);
      }
    }
    // The generators advanced alike.
    EXPECT_EQ(whole->NextUniform(), reduced->NextUniform()) << "params " << p;
  }
}

// A refused row gives the whole row's error; so does a row of -inf.
TEST(LogitCandidatesTest, SameErrors) {
  std::vector<std::vector<float>> rows = {{1.0f, kInf, std::nanf(""), 2.0f},
                                          {0.5f, std::nanf(""), kInf},
                                          {-kInf, -kInf, -kInf}};
  for (double temperature : {0.0, 1.0}) {
    SamplingParams sp;
    sp.temperature = temperature;
    sp.top_k = 2;
    sp.seed = 7;
    Sampler whole = *Sampler::Create(sp);
    Sampler reduced = *Sampler::Create(sp);
    for (const std::vector<float>& row : rows) {
      const LogitCandidates c = Reduce(row);
      const absl::StatusOr<int32_t> a = whole.Sample(row, {});
      const absl::StatusOr<int32_t> b = reduced.Sample(c);
      ASSERT_FALSE(a.ok());
      EXPECT_EQ(a.status(), b.status());
      EXPECT_EQ(Logprob(row, 0).status(), Logprob(c, 0).status());
      EXPECT_EQ(TopLogprobs(row, 2).status(), TopLogprobs(c, 2).status());
    }
  }
}

// Whatever the candidates cannot decide needs the whole row.
TEST(LogitCandidatesTest, DecidesOnlyWhereTheCandidatesSuffice) {
  SamplingParams defaults;  // temperature 0.8, top_k 40, no penalties
  EXPECT_TRUE(CandidatesDecide(defaults));
  SamplingParams p = defaults;
  p.repeat_penalty = 1.1;
  EXPECT_FALSE(CandidatesDecide(p));
  p.repeat_last_n = 0;
  EXPECT_TRUE(CandidatesDecide(p));
  p = defaults;
  p.frequency_penalty = 0.5;
  EXPECT_FALSE(CandidatesDecide(p));
  p = defaults;
  p.presence_penalty = -0.5;
  EXPECT_FALSE(CandidatesDecide(p));
  p = defaults;
  p.top_k = 0;  // the whole vocabulary in the draw
  EXPECT_FALSE(CandidatesDecide(p));
  p.temperature = 0;  // greedy: the best alone
  EXPECT_TRUE(CandidatesDecide(p));
  p = defaults;
  p.top_k = kLogitCandidates + 1;
  EXPECT_FALSE(CandidatesDecide(p));
  p.top_k = kLogitCandidates;
  EXPECT_TRUE(CandidatesDecide(p));
  p.top_logprobs = kLogitCandidates + 1;
  EXPECT_FALSE(CandidatesDecide(p));

  SamplingParams penalised = defaults;
  penalised.frequency_penalty = 1;
  Sampler sampler = *Sampler::Create(penalised);
  EXPECT_EQ(sampler.Sample(Reduce({1.0f, 2.0f})).status().code(), absl::StatusCode::kFailedPrecondition);
  // Asking past the candidates is refused, not answered short.
  std::vector<float> wide(200, 0.0f);
  EXPECT_EQ(TopLogprobs(Reduce(wide), kLogitCandidates + 1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Logprob(Reduce(wide), 150).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace octo
