// Generation's side of speculative decoding, on fixed logits rows (no
// model): greedy verification of a chain or a tree emits exactly what
// Accept would, row by row, and stops where Accept's checks stop; sampled
// verification keeps the target's distribution (a chi-square over many
// seeded rounds, at significance 0.001).
#include <cmath>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/engine/generation.h"
#include "daemon/sampling/sampler.h"
#include "tests/daemon/tokenizer/tokenizer_test_util.h"

namespace octo {
namespace {

using Rows = std::vector<std::vector<float>>;

// <unk> <s> </s> and the 256 byte tokens: 259 ids; </s> (2) ends a generation.
const Tokenizer& SmallTokenizer() {
  static const Tokenizer tokenizer = testing::MakeTokenizer(testing::SpmMetadata({}));
  return tokenizer;
}
int Vocab() { return SmallTokenizer().vocab_size(); }

// A row whose argmax is `best`, the rest spread by a fixed pattern.
std::vector<float> RowFavouring(int32_t best, uint32_t salt) {
  std::vector<float> row(static_cast<size_t>(Vocab()));
  for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<float>((i * 2654435761u + salt) % 1000) / 1000.0f;
  row[static_cast<size_t>(best)] = 5.0f;
  return row;
}

Generation Make(const SamplingParams& params) {
  auto g = Generation::Create(SmallTokenizer(), params, {1, 70, 71}, 64);
  EXPECT_TRUE(g.ok()) << g.status();
  return std::move(*g);
}

SamplingParams Greedy(int max_tokens = -1) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  return p;
}

TEST(GenerationDraftTest, GreedyTreeWalkEmitsWhatAcceptWould) {
  // Root -> {80, 81}; 81 -> {90}; 90 -> {100}. The target's rows prefer 81,
  // then 90, then 101: the walk keeps 81 and 90, then emits 101 and stops.
  DraftTree tree;
  const int a = tree.Add(-1, 80, 0), b = tree.Add(-1, 81, 0);
  const int b1 = tree.Add(b, 90, 0);
  tree.Add(b1, 100, 0);
  tree.Add(a, 95, 0);
  std::map<int, std::vector<float>> rows = {{-1, RowFavouring(81, 1)}, {a, RowFavouring(7, 2)},
                                            {b, RowFavouring(90, 3)},  {b1, RowFavouring(101, 4)},
                                            {3, RowFavouring(9, 5)},   {4, RowFavouring(9, 6)}};
  Generation g = Make(Greedy());
  auto verdict = g.AcceptDraft(tree, {}, [&](int node) { return std::span<const float>(rows[node]); });
  ASSERT_TRUE(verdict.ok()) << verdict.status();
  EXPECT_EQ(verdict->kept, (std::vector<int>{b, b1}));
  ASSERT_EQ(verdict->tokens.size(), 3u);
  EXPECT_EQ(verdict->tokens[0].id, 81);
  EXPECT_EQ(verdict->tokens[2].id, 101);

  // The same rows through Accept, one at a time: the same tokens, text and
  // log-probabilities.
  Generation plain = Make(Greedy());
  size_t i = 0;
  for (int node : {-1, b, b1}) {
    auto token = plain.Accept(rows[node]);
    ASSERT_TRUE(token.ok() && token->has_value());
    EXPECT_EQ((*token)->id, verdict->tokens[i].id);
    EXPECT_EQ((*token)->text, verdict->tokens[i].text);
    EXPECT_EQ((*token)->logprob, verdict->tokens[i].logprob);
    ++i;
  }
  EXPECT_EQ(plain.history(), g.history());
}

TEST(GenerationDraftTest, GreedyWalkStopsWhereTheGenerationEnds) {
  DraftTree chain;
  for (int i = 0; i < 4; ++i) chain.Add(i - 1, 60 + i, 0);
  Rows rows;
  for (int i = 0; i < 5; ++i) rows.push_back(RowFavouring(60 + i, 10 + i));  // the target agrees throughout
  auto row = [&](int node) { return std::span<const float>(rows[static_cast<size_t>(node + 1)]); };

  Generation all = Make(Greedy());
  auto every = all.AcceptDraft(chain, {}, row);
  ASSERT_TRUE(every.ok());
  EXPECT_EQ(every->kept.size(), 4u);
  EXPECT_EQ(every->tokens.size(), 5u) << "four kept and the target's own fifth";

  // max_tokens 2: the second kept token ends it.
  Generation two = Make(Greedy(2));
  auto capped = two.AcceptDraft(chain, {}, row);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->tokens.size(), 2u);
  EXPECT_EQ(capped->kept.size(), 2u);
  EXPECT_EQ(two.finish_reason(), FinishReason::kLength);

  // The end token (</s>, 2) as the target's choice: nothing more is emitted.
  rows[2] = RowFavouring(2, 99);
  Generation ended = Make(Greedy());
  auto stopped = ended.AcceptDraft(chain, {}, row);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->tokens.size(), 2u);
  EXPECT_EQ(stopped->kept.size(), 2u);
  EXPECT_EQ(ended.finish_reason(), FinishReason::kStop);
}

TEST(GenerationDraftTest, SamplingNeedsALinearDraftWithItsDistributions) {
  SamplingParams p;
  p.temperature = 1;
  p.seed = 3;
  Generation g = Make(p);
  DraftTree tree;
  tree.Add(-1, 5, 0);
  tree.Add(-1, 6, 0);
  const std::vector<float> row = RowFavouring(5, 1);
  auto refused = g.AcceptDraft(tree, {}, [&](int) { return std::span<const float>(row); });
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
}

// Pearson's chi-square of `counts` against probabilities `p` over n draws.
double ChiSquare(const std::map<std::pair<int, int>, int>& counts, const std::map<std::pair<int, int>, double>& p,
                 int n) {
  double chi = 0;
  for (const auto& [cell, prob] : p) {
    const double expected = prob * n;
    const auto it = counts.find(cell);
    const double seen = it == counts.end() ? 0 : it->second;
    chi += (seen - expected) * (seen - expected) / expected;
  }
  for (const auto& [cell, seen] : counts) {
    if (!p.contains(cell)) return INFINITY;  // a draw the target could not make
  }
  return chi;
}

// The chi-square quantile at 0.999 for `df` degrees of freedom
// (Wilson-Hilferty; 37.84 at 15 df, where the table gives 37.70).
double ChiSquareCritical(int df) {
  const double z = 3.0902;  // the standard normal's 0.999 quantile
  const double c = 2.0 / (9.0 * df);
  return df * std::pow(1 - c + z * std::sqrt(c), 3);
}

// Sampled two-token rounds: the draft proposes two tokens from its rows,
// the target verifies them by rejection (a refused or fully kept draft's
// next token comes from the target), and the pairs emitted must follow the
// target's own distribution over two steps (with its penalties, the second
// step's distribution depends on the first token).
void ExpectTheTargetsDistribution(const SamplingParams& params) {
  auto row = [](std::vector<std::pair<int32_t, float>> favoured) {
    std::vector<float> r(static_cast<size_t>(Vocab()), -5.0f);
    for (auto [id, logit] : favoured) r[static_cast<size_t>(id)] = logit;
    return r;
  };
  // The draft's rows favour other tokens than the target's, so drafts are
  // refused often and the residual draws matter; token 10 is a favourite of
  // both target rows, so a penalty on the first token changes the second.
  const std::vector<float> target0 = row({{10, 1.0f}, {11, 0.5f}, {12, 0.0f}, {13, -0.5f}});
  const std::vector<float> target1 = row({{20, 0.2f}, {21, 0.9f}, {22, -0.3f}, {10, 0.1f}});
  const std::vector<float> draft0 = row({{10, 0.0f}, {11, 1.5f}, {14, 0.5f}, {12, 0.2f}});
  const std::vector<float> draft1 = row({{20, 1.0f}, {21, 0.0f}, {23, 0.8f}, {10, 0.3f}});

  // The target's distribution over pairs, from the sampler's own.
  Sampler reference = *Sampler::Create(params);
  const std::vector<int32_t> prompt = Make(params).history();
  std::map<std::pair<int, int>, double> want;
  const std::vector<TokenProb> first = *reference.Distribution(target0, prompt);
  for (const TokenProb& a : first) {
    std::vector<int32_t> history = prompt;
    history.push_back(a.id);
    const std::vector<TokenProb> second = *reference.Distribution(target1, history);
    for (const TokenProb& b : second) want[{a.id, b.id}] = a.p * b.p;
  }

  constexpr int kRounds = 20000;
  std::map<std::pair<int, int>, int> seen;
  int kept_drafts = 0;
  for (int seed = 0; seed < kRounds; ++seed) {
    SamplingParams p = params;
    p.seed = static_cast<uint64_t>(seed) + 1;
    p.max_tokens = 2;
    Generation g = Make(p);
    // A two-token draft from the draft's rows, then one verification.
    auto d0 = g.Propose(draft0, {});
    ASSERT_TRUE(d0.ok());
    auto d1 = g.Propose(draft1, std::vector<int32_t>{d0->token});
    ASSERT_TRUE(d1.ok());
    DraftTree chain;
    chain.Add(-1, d0->token, 0);
    chain.Add(0, d1->token, 0);
    const std::vector<std::vector<TokenProb>> q = {d0->q, d1->q};
    const Rows target = {target0, target1, target1};
    auto verdict = g.AcceptDraft(chain, q, [&](int node) { return std::span<const float>(target[node + 1]); });
    ASSERT_TRUE(verdict.ok()) << verdict.status();
    kept_drafts += static_cast<int>(verdict->kept.size());
    std::vector<int32_t> out;
    for (const GeneratedToken& t : verdict->tokens) out.push_back(t.id);
    // One token only: the second comes from a plain step, as the scheduler's next pass would.
    if (out.size() == 1) {
      auto next = g.Accept(target1);
      ASSERT_TRUE(next.ok() && next->has_value());
      out.push_back((*next)->id);
    }
    ASSERT_EQ(out.size(), 2u);
    ++seen[{out[0], out[1]}];
  }
  const int df = static_cast<int>(want.size()) - 1;
  const double chi = ChiSquare(seen, want, kRounds), critical = ChiSquareCritical(df);
  std::printf("chi-square %.2f (critical %.2f at 0.001, %d df); %.2f draft tokens kept per round\n", chi, critical,
              df, static_cast<double>(kept_drafts) / kRounds);
  EXPECT_LT(chi, critical);
  EXPECT_GT(kept_drafts, kRounds / 4) << "the drafts agree often enough to exercise acceptance";
}

TEST(GenerationDraftTest, SampledRoundsKeepTheTargetsDistribution) {
  SamplingParams params;  // top-k 4 at temperature 1: four candidates per row
  params.temperature = 1;
  params.top_k = 4;
  params.top_p = 1;
  params.min_p = 0;
  ExpectTheTargetsDistribution(params);
}

TEST(GenerationDraftTest, SampledRoundsKeepTheTargetsDistributionWithPenaltiesAndCuts) {
  SamplingParams params;
  params.temperature = 0.8;
  params.top_k = 5;
  params.top_p = 0.97;
  params.min_p = 0.02;
  params.repeat_penalty = 2.0;
  params.presence_penalty = 0.6;
  params.frequency_penalty = 0.2;
  ExpectTheTargetsDistribution(params);
}

}  // namespace
}  // namespace octo
