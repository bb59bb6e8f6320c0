// The candidates path through the forward pass, on the CPU backend and
// (built as cuda_candidates_test, label cuda) the CUDA one: a generation
// that takes each step's logits row reduced (SequenceStep::candidates,
// Backend::TopLogits) draws the tokens, text and logprobs of one that takes
// the row whole -- greedy and top-k, alone and in a batch -- bit for bit on
// the CPU and in the executor, logprobs within 1e-12 on a GPU (its exp);
// and a pass with any step that needs its row whole brings every row back
// whole.
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/engine/backend_setup.h"
#include "daemon/engine/generation.h"
#include "daemon/engine/model.h"
#include "daemon/grammar/grammar.h"
#include "storage/decompose.h"
#include "tests/storage/test_models.h"
#include "tests/temp_dir.h"

#ifndef OCTO_TEST_BACKEND
#define OCTO_TEST_BACKEND "cpu"
#endif

namespace octo::testing {
namespace {

// Where exp is the host's, logprobs are the same bits both ways.
#if defined(OCTO_CUDA_SIM)
constexpr bool kHostExp = true;
#else
constexpr bool kHostExp = std::string_view(OCTO_TEST_BACKEND) == "cpu";
#endif

class CandidatesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const std::string gguf = dir_->Path("tiny.gguf");
    GenerateModel(gguf, "tiny", "Q8_0", [](ModelShape& s) { s.n_layers = 2; });
    const auto decomposed = Decompose(gguf, dir_->Path("tiny"), DecomposeOptions{});
    ASSERT_TRUE(decomposed.ok()) << decomposed.status();
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (std::string(OCTO_TEST_BACKEND) == "cuda" && UsableCudaDevices() == 0) GTEST_SKIP() << "no CUDA device";
    ModelOptions options;
    options.backend = OCTO_TEST_BACKEND;
    options.n_threads = 2;
    auto model = Model::Open(dir_->Path("tiny"), options);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    auto tokenizer = Tokenizer::FromMetadata(model_->manifest().tokenizer);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::make_unique<Tokenizer>(std::move(*tokenizer));
  }

  Generation Make(const SamplingParams& params, const std::string& prompt) {
    auto g = Generation::Create(*tokenizer_, params, tokenizer_->Encode(prompt, true, false), 256);
    EXPECT_TRUE(g.ok()) << g.status();
    return std::move(*g);
  }

  static TempDir* dir_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
};
TempDir* CandidatesTest::dir_ = nullptr;

void ExpectSameLogprob(double want, double got, const std::string& what) {
  if (kHostExp) {
    EXPECT_EQ(std::bit_cast<uint64_t>(want), std::bit_cast<uint64_t>(got)) << what << ": " << want << " vs " << got;
  } else {
    EXPECT_NEAR(got, want, 1e-12 * (1 + std::abs(want))) << what;  // the log of a sum within 1e-12 relative
  }
}

void ExpectSameToken(const GeneratedToken& want, const GeneratedToken& got, const std::string& what) {
  EXPECT_EQ(want.id, got.id) << what;
  EXPECT_EQ(want.text, got.text) << what;
  ExpectSameLogprob(want.logprob, got.logprob, what + " logprob");
  ASSERT_EQ(want.top.size(), got.top.size()) << what;
  for (size_t j = 0; j < want.top.size(); ++j) {
    EXPECT_EQ(want.top[j].id, got.top[j].id) << what << " alternative " << j;
    EXPECT_EQ(want.top[j].text, got.top[j].text) << what << " alternative " << j;
    ExpectSameLogprob(want.top[j].logprob, got.top[j].logprob, what + " alternative " + std::to_string(j));
  }
}

// Sequences of one batch, decoded in lockstep twice over: once taking their
// rows whole, once reduced. `params` per sequence (each with a seed).
void ExpectSameGenerations(Model& model, std::vector<Generation> whole, std::vector<Generation> reduced, int steps) {
  const size_t n = whole.size();
  std::vector<std::unique_ptr<KvCache>> whole_kv, reduced_kv;
  for (size_t i = 0; i < n; ++i) {
    whole_kv.push_back(model.NewCache(256));
    reduced_kv.push_back(model.NewCache(256));
  }
  std::vector<float> logits;
  std::vector<LogitCandidates> candidates;
  int emitted = 0;
  for (int t = 0; t < steps; ++t) {
    std::vector<SequenceStep> whole_batch, reduced_batch;
    std::vector<size_t> live;
    for (size_t i = 0; i < n; ++i) {
      if (whole[i].finished()) continue;
      ASSERT_FALSE(reduced[i].finished());
      ASSERT_TRUE(reduced[i].TakesCandidates());
      live.push_back(i);
      whole_batch.push_back(SequenceStep{.kv = whole_kv[i].get(), .tokens = whole[i].NextInput()});
      reduced_batch.push_back(
          SequenceStep{.kv = reduced_kv[i].get(), .tokens = reduced[i].NextInput(), .candidates = true});
    }
    if (live.empty()) break;
    ASSERT_TRUE(model.Forward(whole_batch, logits, nullptr, &candidates).ok());
    ASSERT_TRUE(candidates.empty()) << "no step asked for candidates";
    const std::vector<float> rows = logits;
    ASSERT_TRUE(model.Forward(reduced_batch, logits, nullptr, &candidates).ok());
    ASSERT_TRUE(logits.empty()) << "every step took candidates";
    ASSERT_EQ(candidates.size(), live.size());
    const size_t vocab = model.config().vocab_size;
    for (size_t b = 0; b < live.size(); ++b) {
      const size_t i = live[b];
      whole[i].InputFed();
      reduced[i].InputFed();
      auto want = whole[i].Accept(std::span<const float>(rows).subspan(b * vocab, vocab));
      auto got = reduced[i].Accept(candidates[b]);
      ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
      ASSERT_EQ(want->has_value(), got->has_value());
      if (want->has_value()) {
        ++emitted;
        ExpectSameToken(**want, **got, "sequence " + std::to_string(i) + " step " + std::to_string(t));
      }
    }
  }
  EXPECT_GE(emitted, steps / 2) << "few tokens compared";
}

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0;
  p.top_logprobs = 5;
  return p;
}
SamplingParams TopK(int32_t k, double top_p, uint64_t seed) {
  SamplingParams p;
  p.temperature = 1.2;
  p.top_k = k;
  p.top_p = top_p;
  p.min_p = 0.02;
  p.top_logprobs = 3;
  p.seed = seed;
  return p;
}

TEST_F(CandidatesTest, GreedySameTokensAndLogprobs) {
  std::vector<Generation> whole, reduced;
  whole.push_back(Make(Greedy(), "Once upon a time"));
  reduced.push_back(Make(Greedy(), "Once upon a time"));
  ExpectSameGenerations(*model_, std::move(whole), std::move(reduced), 16);
}

TEST_F(CandidatesTest, TopKSameTokensAndLogprobs) {
  for (const SamplingParams& p : {TopK(1, 1.0, 3), TopK(5, 1.0, 4), TopK(40, 0.95, 5), TopK(kLogitCandidates, 0.9, 6)}) {
    std::vector<Generation> whole, reduced;
    whole.push_back(Make(p, "The quick brown fox"));
    reduced.push_back(Make(p, "The quick brown fox"));
    ExpectSameGenerations(*model_, std::move(whole), std::move(reduced), 16);
  }
}

// A batch: a prompt and two decoding sequences of different settings, one
// reduced row each, in the batch's order.
TEST_F(CandidatesTest, BatchSameTokensAndLogprobs) {
  const std::vector<std::pair<SamplingParams, std::string>> seqs = {
      {Greedy(), "Once upon a time"}, {TopK(40, 0.95, 9), "Hello"}, {TopK(7, 1.0, 10), "A long time ago in a galaxy"}};
  std::vector<Generation> whole, reduced;
  for (const auto& [p, prompt] : seqs) {
    whole.push_back(Make(p, prompt));
    reduced.push_back(Make(p, prompt));
  }
  ExpectSameGenerations(*model_, std::move(whole), std::move(reduced), 12);
}

// Settings the candidates cannot decide take the whole row; a pass with
// any step that needs it (or wants every row) brings every row back whole.
TEST_F(CandidatesTest, FallbacksTakeTheWholeRow) {
  SamplingParams penalties = Greedy();
  penalties.repeat_penalty = 1.2;
  EXPECT_FALSE(Make(penalties, "x").TakesCandidates());
  SamplingParams unlimited = TopK(0, 1.0, 1);  // temperature > 0 over the whole vocabulary
  EXPECT_FALSE(Make(unlimited, "x").TakesCandidates());
  Generation constrained = Make(Greedy(), "x");
  auto grammar = Grammar::Parse(R"(root ::= "yes" | "no")");
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  constrained.Constrain(std::make_shared<const Grammar>(*std::move(grammar)), NewGrammarVocab(*tokenizer_));
  EXPECT_FALSE(constrained.TakesCandidates());
  EXPECT_EQ(constrained.Accept(LogitCandidates{}).status().code(), absl::StatusCode::kFailedPrecondition);

  const size_t vocab = model_->config().vocab_size;
  const std::vector<int32_t> a = {1, 20, 30}, b = {1, 40};
  auto kv_a = model_->NewCache(64), kv_b = model_->NewCache(64);
  std::vector<float> logits;
  std::vector<LogitCandidates> candidates = {LogitCandidates{}};
  const SequenceStep mixed[] = {{.kv = kv_a.get(), .tokens = a, .candidates = true},
                                {.kv = kv_b.get(), .tokens = b, .candidates = false}};
  ASSERT_TRUE(model_->Forward(mixed, logits, nullptr, &candidates).ok());
  EXPECT_EQ(logits.size(), 2 * vocab);
  EXPECT_TRUE(candidates.empty());
  auto kv_c = model_->NewCache(64);
  const SequenceStep all_rows[] = {{.kv = kv_c.get(), .tokens = a, .all_logits = true, .candidates = true}};
  ASSERT_TRUE(model_->Forward(all_rows, logits, nullptr, &candidates).ok());
  EXPECT_EQ(logits.size(), a.size() * vocab);
  EXPECT_TRUE(candidates.empty());
}

}  // namespace
}  // namespace octo::testing
