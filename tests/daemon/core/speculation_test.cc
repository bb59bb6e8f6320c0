// Speculative decoding through the runtime (daemon/core/speculation.h), on
// generated models: greedy output with a draft is the output without one,
// token for token and log-probability for log-probability, whatever the
// draft proposes -- the target itself (always right), the small model it was
// widened from (mostly right), a random model (nearly always wrong) --
// with linear drafts and trees, for one session and eight at once, resident
// and streamed, on a session's second turn, near the context's end, and on
// a hybrid model whose recurrent state must be rolled back. A draft with
// another vocabulary is refused, naming the difference; k adapts; status
// and the job's stats report what the draft did; a cancelled job frees both
// caches. On ../shared's models too: the trained stories260K drafts for its
// widened copy.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "storage/decompose.h"
#include "daemon/grammar/json_grammar.h"
#include "nlohmann/json.hpp"
#include "tests/daemon/core/core_test_util.h"
#include "tests/long_tests.h"
#include "tests/shared_data.h"
#include "tests/storage/test_models.h"
#include "tests/temp_dir.h"

namespace octo::testing {
namespace {

constexpr uint32_t kLayers = 4;
const char kPrompt[] = "Once upon a time";

class SpeculationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new TempDir();
    const std::string r = root_->path().string();
    MakeModelDir(r, "near", "tiny", "Q4_K_M", 2);               // the draft that is mostly right
    MakeWidenedModelDir(r, "m", "near", kLayers, 0.02f);        // the target: "near" widened, perturbed
    MakeModelDir(r, "wrong", "tiny", "Q4_K_M", 2, /*seed=*/7);  // another random model: nearly always wrong
    MakeModelDir(r, "qwen-vocab", "tiny-qwen2", "Q8_0", 1);     // 600 tokens
    const std::string gguf = root_->Path("spm600.gguf");        // 600 tokens, other texts
    GenerateModel(gguf, "tiny", "Q8_0", [](ModelShape& s) {
      s.n_layers = 1;
      s.vocab_size = 600;
    });
    ASSERT_TRUE(Decompose(gguf, root_->Path("spm600"), DecomposeOptions{}).ok());
  }
  static void TearDownTestSuite() { delete root_; }

  static RuntimeOptions Options(const std::string& draft = "") {
    RuntimeOptions o = TestRuntimeOptions(root_->path().string());
    o.model = "m";
    o.draft_model = draft;
    return o;
  }
  static std::unique_ptr<RuntimeImpl> Start(const RuntimeOptions& options) {
    auto runtime = RuntimeImpl::Create(options, FileLayerStream::Factory());
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    return runtime.ok() ? std::move(*runtime) : nullptr;
  }

  // A greedy job with top-3 log-probabilities and, when given, a draft.
  static GenerateJob Job(int max_tokens, const std::string& draft, const std::string& session = "") {
    GenerateJob job = GreedyJob(kPrompt, max_tokens, session);
    job.sampling.top_logprobs = 3;
    job.draft_model = draft;
    return job;
  }

  static inline TempDir* root_ = nullptr;
};

// The same tokens, texts and log-probabilities.
void ExpectSameOutput(const CollectingSink& want, const CollectingSink& got, const std::string& what) {
  ASSERT_TRUE(want.status.ok()) << want.status;
  ASSERT_TRUE(got.status.ok()) << what << ": " << got.status;
  ASSERT_EQ(want.tokens, got.tokens) << what;
  EXPECT_EQ(want.text, got.text) << what;
  EXPECT_EQ(want.finish_reason, got.finish_reason) << what;
  for (size_t i = 0; i < want.generated.size(); ++i) {
    ASSERT_EQ(want.generated[i].logprob, got.generated[i].logprob) << what << ", token " << i;
    ASSERT_EQ(want.generated[i].top.size(), got.generated[i].top.size());
    for (size_t j = 0; j < want.generated[i].top.size(); ++j) {
      EXPECT_EQ(want.generated[i].top[j].id, got.generated[i].top[j].id) << what << ", token " << i;
      EXPECT_EQ(want.generated[i].top[j].logprob, got.generated[i].top[j].logprob) << what << ", token " << i;
    }
  }
}

double Acceptance(const JobStats& s) {
  return s.draft_proposed > 0 ? static_cast<double>(s.draft_accepted) / s.draft_proposed : 0;
}

struct DraftCase {
  const char* draft;
  int tree_nodes;  // 0: linear
};

class GreedySpeculationTest : public SpeculationTest, public ::testing::WithParamInterface<DraftCase> {};

TEST_P(GreedySpeculationTest, GivesThePlainTokensWhateverTheDraftProposes) {
  const DraftCase c = GetParam();
  RuntimeOptions o = Options();
  o.speculation.tree_nodes = c.tree_nodes;
  o.speculation.tree_branches = 3;
  auto runtime = Start(o);
  ASSERT_NE(runtime, nullptr);
  auto plain = Submit(*runtime, Job(48, "none"));
  ASSERT_TRUE(plain->Wait());
  auto spec = Submit(*runtime, Job(48, c.draft));
  ASSERT_TRUE(spec->Wait());
  ExpectSameOutput(*plain, *spec, std::string("draft ") + c.draft);
  const JobStats& s = spec->stats;
  std::printf("draft %-6s tree %2d: proposed %d, accepted %d (%.2f), %d target passes for %d tokens\n", c.draft,
              c.tree_nodes, s.draft_proposed, s.draft_accepted, Acceptance(s), s.target_passes, s.generated_tokens);
  EXPECT_EQ(s.draft_model, c.draft);
  EXPECT_GT(s.draft_proposed, 0);
  EXPECT_EQ(plain->stats.target_passes, plain->stats.generated_tokens) << "no draft: one pass per token";
  if (std::string(c.draft) == "m") {
    // The target drafting for itself is always right (a tree's other
    // branches aside).
    if (c.tree_nodes == 0) {
      EXPECT_EQ(s.draft_accepted, s.draft_proposed);
    }
    EXPECT_LT(s.target_passes * 4, s.generated_tokens) << "many tokens per pass";
  }
  if (std::string(c.draft) == "near") {
    // The small model the target was widened from: mostly right.
    if (c.tree_nodes == 0) {
      EXPECT_GT(Acceptance(s), 0.5);
    }
    EXPECT_LT(s.target_passes * 2, s.generated_tokens) << "at least two tokens per pass";
  }
  if (std::string(c.draft) == "wrong") {
    EXPECT_LT(Acceptance(s), 0.3);
  }
}

INSTANTIATE_TEST_SUITE_P(Drafts, GreedySpeculationTest,
                         ::testing::Values(DraftCase{"m", 0}, DraftCase{"near", 0}, DraftCase{"wrong", 0},
                                           DraftCase{"m", 24}, DraftCase{"near", 24}, DraftCase{"wrong", 24}),
                         [](const auto& info) {
                           return std::string(info.param.draft) + (info.param.tree_nodes > 0 ? "Tree" : "Linear");
                         });

// 12 tokens each in CI (a minute under ASan at 24), 24 in the long form.
TEST_F(SpeculationTest, EightConcurrentSessionsGetTheirSoloTokens) {
  const int tokens = ::octo::testing::LongTests() ? 24 : 12;
  for (const int tree : {0, 16}) {
    RuntimeOptions o = Options("near");
    o.speculation.tree_nodes = tree;
    auto runtime = Start(o);
    ASSERT_NE(runtime, nullptr);
    const std::vector<std::string> prompts = {"Once upon a time", "The cat", "A little girl", "He said",
                                              "In the park",      "One day", "Tom and Sue",   "It was"};
    std::vector<std::shared_ptr<CollectingSink>> solo, together;
    for (const std::string& p : prompts) {
      GenerateJob job = Job(tokens, "none");
      job.prompt = p;
      solo.push_back(Submit(*runtime, job));
      ASSERT_TRUE(solo.back()->Wait());
    }
    for (const std::string& p : prompts) {
      GenerateJob job = Job(tokens, "");  // the daemon's draft
      job.prompt = p;
      together.push_back(Submit(*runtime, job));
    }
    int batched = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_TRUE(together[i]->Wait());
      ExpectSameOutput(*solo[i], *together[i], "session " + std::to_string(i) + ", tree " + std::to_string(tree));
      EXPECT_EQ(together[i]->stats.draft_model, "near");
      batched = std::max(batched, together[i]->stats.batch_peak);
    }
    EXPECT_GT(batched, 1) << "the sessions shared passes";
  }
}

TEST_F(SpeculationTest, AStreamedTargetGivesTheResidentTokens) {
  auto resident = Start(Options());
  ASSERT_NE(resident, nullptr);
  auto want = Submit(*resident, Job(40, "none"));
  ASSERT_TRUE(want->Wait());
  resident.reset();
  RuntimeOptions o = Options("near");
  o.layer_budget_bytes = 3 * LargestLayerBytes(root_->Path("m"));  // one resident layer and the ring
  o.pin_first = 1;
  o.pin_last = 0;
  for (const int tree : {0, 16}) {
    o.speculation.tree_nodes = tree;
    auto streamed = Start(o);
    ASSERT_NE(streamed, nullptr);
    EXPECT_GT(streamed->Report().residency.streamed_layers, 0u);
    auto got = Submit(*streamed, Job(40, ""));
    ASSERT_TRUE(got->Wait());
    ExpectSameOutput(*want, *got, "streamed, tree " + std::to_string(tree));
    EXPECT_LT(got->stats.target_passes, got->stats.generated_tokens) << "fewer streamed passes than tokens";
  }
}

TEST_F(SpeculationTest, ASessionsSecondTurnGivesThePlainTokens) {
  std::vector<std::vector<int32_t>> turns[2];
  for (const char* draft : {"none", "near"}) {
    auto runtime = Start(Options());
    ASSERT_NE(runtime, nullptr);
    auto session = runtime->CreateSession(0, "");
    ASSERT_TRUE(session.ok());
    const int which = std::string(draft) == "none" ? 0 : 1;
    for (const char* prompt : {"Once upon a time", " Then the dog"}) {
      GenerateJob job = Job(20, draft, session->id);
      job.prompt = prompt;
      auto sink = Submit(*runtime, job);
      ASSERT_TRUE(sink->Wait());
      ASSERT_TRUE(sink->status.ok()) << sink->status;
      turns[which].push_back(sink->tokens);
      if (turns[which].size() == 2) {
        EXPECT_GT(sink->stats.cached_tokens, 0) << "the second turn reuses the cache";
      }
    }
  }
  EXPECT_EQ(turns[0], turns[1]);
}

TEST_F(SpeculationTest, TheContextsEndAndMaxTokensStopAsWithoutADraft) {
  auto runtime = Start(Options("m"));
  ASSERT_NE(runtime, nullptr);
  // A 40-position context: the prompt plus ~35 tokens, so drafts must
  // shrink to fit its end (a one-shot job may otherwise use the model's
  // whole trained context).
  auto job = [](int max_tokens, const std::string& draft) {
    GenerateJob j = Job(max_tokens, draft);
    j.context_length = 40;
    return j;
  };
  for (const int max_tokens : {-1, 5, 9}) {
    auto plain = Submit(*runtime, job(max_tokens, "none"));
    auto spec = Submit(*runtime, job(max_tokens, ""));
    ASSERT_TRUE(plain->Wait() && spec->Wait());
    ExpectSameOutput(*plain, *spec, "max_tokens " + std::to_string(max_tokens));
    if (max_tokens < 0) {
      EXPECT_EQ(plain->finish_reason, "context") << "ran to the context's end";
    }
  }
  // A stop string cuts the text where it does without a draft.
  auto plain = Submit(*runtime, Job(30, "none"));
  ASSERT_TRUE(plain->Wait());
  ASSERT_GT(plain->text.size(), 12u);
  GenerateJob stop_plain = Job(30, "none"), stop_spec = Job(30, "");
  // A whole token's text (a piece of one may not be UTF-8), past the first few.
  auto piece = std::find_if(plain->generated.begin() + 3, plain->generated.end(), [](const GeneratedToken& t) {
    return !t.text.empty() && std::all_of(t.text.begin(), t.text.end(), [](char c) { return c > ' ' && c < 127; });
  });
  ASSERT_NE(piece, plain->generated.end());
  stop_plain.sampling.stop = stop_spec.sampling.stop = {piece->text};
  auto a = Submit(*runtime, stop_plain), b = Submit(*runtime, stop_spec);
  ASSERT_TRUE(a->Wait() && b->Wait());
  ExpectSameOutput(*a, *b, "a stop string");
  EXPECT_EQ(b->finish_reason, "stop");
}

TEST_F(SpeculationTest, ADraftWithAnotherVocabularyIsRefusedNamingTheDifference) {
  auto runtime = Start(Options());
  ASSERT_NE(runtime, nullptr);
  auto sizes = runtime->LoadModel("m", {.draft_model = "qwen-vocab"});
  ASSERT_EQ(sizes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(sizes.status().message().find("600 tokens"), std::string::npos) << sizes.status();
  EXPECT_NE(sizes.status().message().find("512"), std::string::npos) << sizes.status();
  EXPECT_NE(sizes.status().message().find("qwen-vocab"), std::string::npos) << sizes.status();
  // A refused load changes nothing: the model loaded before serves on.
  const std::optional<ModelSummary> still = runtime->Report().model;
  ASSERT_TRUE(still.has_value()) << "a refused draft must not leave octod without a model";
  EXPECT_EQ(still->path, "m");
  EXPECT_NE(sizes.status().message().find("m is still loaded"), std::string::npos) << sizes.status();
  EXPECT_TRUE(RunGreedy(*runtime, kPrompt, 2)->status.ok());

  ASSERT_TRUE(runtime->LoadModel("qwen-vocab", {}).ok());
  auto texts = runtime->LoadModel("qwen-vocab", {.draft_model = "spm600"});  // same size, other token texts
  ASSERT_EQ(texts.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(texts.status().message().find("at token"), std::string::npos) << texts.status();

  // Per request too, and the daemon keeps serving.
  ASSERT_TRUE(runtime->LoadModel("m", {}).ok());
  auto sink = std::make_shared<CollectingSink>();
  auto refused = runtime->Submit(Job(4, "qwen-vocab"), sink);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  auto missing = runtime->Submit(Job(4, "absent"), sink);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  GenerateJob bad_max = Job(4, "m");
  bad_max.draft_max = 99;
  EXPECT_EQ(runtime->Submit(bad_max, sink).status().code(), absl::StatusCode::kInvalidArgument);
  auto fine = RunGreedy(*runtime, kPrompt, 4);
  EXPECT_TRUE(fine->status.ok());
  EXPECT_EQ(fine->tokens.size(), 4u);
}

TEST_F(SpeculationTest, KFollowsTheAcceptance) {
  RuntimeOptions o = Options();
  o.speculation.draft_max = 8;
  o.speculation.draft_min = 1;
  auto runtime = Start(o);
  ASSERT_NE(runtime, nullptr);
  auto right = Submit(*runtime, Job(80, "m"));
  auto wrong = Submit(*runtime, Job(80, "wrong"));
  ASSERT_TRUE(right->Wait() && wrong->Wait());
  // Always right: every round drafts 8. Nearly always wrong: k falls to 1
  // within a few rounds and stays near it.
  const double right_per_round = static_cast<double>(right->stats.draft_proposed) / right->stats.target_passes;
  const double wrong_per_round = static_cast<double>(wrong->stats.draft_proposed) / wrong->stats.target_passes;
  std::printf("tokens drafted per round: always right %.2f, nearly always wrong %.2f\n", right_per_round,
              wrong_per_round);
  EXPECT_GT(right_per_round, 6.0);
  EXPECT_LT(wrong_per_round, 2.0);
}

TEST_F(SpeculationTest, StatusReportsTheDraftAndWhatItDid) {
  auto runtime = Start(Options("near"));
  ASSERT_NE(runtime, nullptr);
  ASSERT_TRUE(runtime->Report().model.has_value());
  EXPECT_EQ(runtime->Report().model->draft_model, "near");
  auto sink = Submit(*runtime, Job(32, ""));
  ASSERT_TRUE(sink->Wait());
  const SpeculationReport r = runtime->Report().speculation;
  EXPECT_TRUE(r.present);
  EXPECT_EQ(r.draft_model, "near");
  EXPECT_GT(r.draft_bytes, 0u);
  EXPECT_EQ(r.proposed, static_cast<uint64_t>(sink->stats.draft_proposed));
  EXPECT_EQ(r.accepted, static_cast<uint64_t>(sink->stats.draft_accepted));
  EXPECT_GE(r.rounds, 1u);
  EXPECT_LE(r.rounds, static_cast<uint64_t>(sink->stats.target_passes) - 1) << "at most all but the prompt's pass";
  EXPECT_GT(r.tokens_per_round, 1.0);
  EXPECT_NEAR(r.acceptance, Acceptance(sink->stats), 1e-12);
  EXPECT_EQ(r.errors, 0u);
}

TEST_F(SpeculationTest, SampledGenerationsWithADraftRepeatWithTheirSeed) {
  auto runtime = Start(Options("near"));
  ASSERT_NE(runtime, nullptr);
  GenerateJob job = Job(32, "");
  job.sampling.temperature = 0.9;
  job.sampling.seed = 1234;
  auto a = Submit(*runtime, job), b = Submit(*runtime, job);
  ASSERT_TRUE(a->Wait() && b->Wait());
  ASSERT_TRUE(a->status.ok()) << a->status;
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->tokens.size(), 32u);
  EXPECT_GT(a->stats.draft_proposed, 0);
}

// A constrained job drafts only what its grammar allows, and verification
// keeps the grammar's state exact: greedy, the same tokens (and
// log-probabilities of the constrained distribution) as without a draft,
// tree drafts asked for or not; sampled, every reply that ends is JSON.
TEST_F(SpeculationTest, ConstrainedJobsWithADraftGiveTheirPlainTokens) {
  for (int tree : {0, 8}) {
    RuntimeOptions o = Options();
    o.speculation.tree_nodes = tree;
    auto runtime = Start(o);
    ASSERT_NE(runtime, nullptr);
    GenerateJob plain = Job(64, "none");
    plain.grammar = kJsonObjectGrammar;
    auto want = Submit(*runtime, plain);
    ASSERT_TRUE(want->Wait());
    GenerateJob drafted = plain;
    drafted.draft_model = "near";
    auto got = Submit(*runtime, drafted);
    ASSERT_TRUE(got->Wait());
    ExpectSameOutput(*want, *got, absl::StrCat("tree ", tree));
    EXPECT_GT(got->stats.draft_proposed, 0) << "the draft proposed";
    EXPECT_GT(got->stats.draft_accepted, 0) << "and some of it was kept";
  }
  auto runtime = Start(Options("near"));
  ASSERT_NE(runtime, nullptr);
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    GenerateJob job = Job(200, "");
    job.sampling.temperature = 0.9;
    job.sampling.top_logprobs = 0;
    job.sampling.seed = seed;
    job.grammar = kJsonObjectGrammar;
    auto sink = Submit(*runtime, job);
    ASSERT_TRUE(sink->Wait());
    ASSERT_TRUE(sink->status.ok()) << sink->status;
    if (sink->finish_reason == "stop") {
      EXPECT_TRUE(nlohmann::json::accept(sink->text)) << "seed " << seed << ": " << sink->text;
    }
    EXPECT_GT(sink->stats.draft_proposed, 0);
  }
}

TEST_F(SpeculationTest, ACancelledJobFreesBothCaches) {
  RuntimeOptions o = Options("near");
  o.session_context = 2048;
  auto runtime = Start(o);
  ASSERT_NE(runtime, nullptr);
  auto sink = std::make_shared<CollectingSink>();
  auto handle = runtime->Submit(Job(-1, ""), sink);
  ASSERT_TRUE(handle.ok());
  ASSERT_TRUE(sink->WaitTokens(20));
  EXPECT_GT(runtime->Report().kv_used_bytes, 0u);
  (*handle)->Cancel();
  ASSERT_TRUE(sink->Wait());
  EXPECT_EQ(sink->finish_reason, "cancelled");
  EXPECT_EQ(runtime->Report().kv_used_bytes, 0u) << "the target's and the draft's caches are gone";
}

// With a quantized KV cache too: rejected draft rows are dropped and a
// tree's accepted path moved into place as encoded rows, so the tokens are
// the plain ones at the same cache types, bit for bit.
TEST_F(SpeculationTest, AQuantizedCacheGivesThePlainTokens) {
  RuntimeOptions o = Options();
  o.kv_types = {GgmlType::kQ8_0, GgmlType::kQ4_0};
  for (const int tree : {0, 16}) {
    o.speculation.tree_nodes = tree;
    auto runtime = Start(o);
    ASSERT_NE(runtime, nullptr);
    auto plain = Submit(*runtime, Job(32, "none"));
    ASSERT_TRUE(plain->Wait());
    for (const char* draft : {"near", "wrong"}) {
      auto spec = Submit(*runtime, Job(32, draft));
      ASSERT_TRUE(spec->Wait());
      ExpectSameOutput(*plain, *spec, absl::StrCat("k q8_0 v q4_0, draft ", draft, ", tree ", tree));
      EXPECT_GT(spec->stats.draft_proposed, 0);
    }
  }
}

TEST_F(SpeculationTest, AHybridModelRollsItsStateBack) {
  const std::string r = root_->path().string();
  // The widener makes llama models only: the hybrid drafts for itself
  // (always right) and with another random hybrid (nearly always wrong).
  MakeModelDir(r, "hybrid", "tiny-qwen35", "Q4_K_M", 4);
  MakeModelDir(r, "hybrid-wrong", "tiny-qwen35", "Q4_K_M", 2, /*seed=*/7);
  RuntimeOptions o = TestRuntimeOptions(r);
  o.model = "hybrid";
  o.speculation.tree_nodes = 16;  // a hybrid drafts linearly all the same
  auto runtime = Start(o);
  ASSERT_NE(runtime, nullptr);
  // Its attention layers' cache quantized: the recurrent state stays f32
  // and rolls back the same way.
  o.kv_types = {GgmlType::kQ8_0, GgmlType::kQ8_0};
  auto quantized = Start(o);
  ASSERT_NE(quantized, nullptr);
  {
    auto plain = Submit(*quantized, Job(24, "none"));
    auto spec = Submit(*quantized, Job(24, "hybrid-wrong"));
    ASSERT_TRUE(plain->Wait() && spec->Wait());
    ExpectSameOutput(*plain, *spec, "hybrid, q8_0 cache, draft hybrid-wrong");
  }
  quantized.reset();
  for (const char* draft : {"hybrid-wrong", "hybrid"}) {
    auto plain = Submit(*runtime, Job(40, "none"));
    auto spec = Submit(*runtime, Job(40, draft));
    ASSERT_TRUE(plain->Wait() && spec->Wait());
    ExpectSameOutput(*plain, *spec, std::string("hybrid, draft ") + draft);
    std::printf("hybrid, draft %s: accepted %d of %d, %d passes for %d tokens\n", draft, spec->stats.draft_accepted,
                spec->stats.draft_proposed, spec->stats.target_passes, spec->stats.generated_tokens);
    EXPECT_GT(spec->stats.draft_proposed, 0);
    if (std::string(draft) == "hybrid") {
      EXPECT_LT(spec->stats.target_passes * 2, spec->stats.generated_tokens);
    }
  }
}

// ../shared: the trained stories260K drafting for its widened Q4_K_M copy
// (the same function at 256-wide rows, the same vocabulary): real text, a
// draft that is nearly always right, linear and as a tree, one session and
// four at once.
TEST(SharedModelSpeculationTest, Stories260KDraftsForItsWidenedCopy) {
  const std::string target = SharedPath("models/widened/llama-Q4_K_M-mix.gguf");
  const std::string draft = SharedPath("models/stories260K.gguf");
  if (!std::filesystem::exists(target) || !std::filesystem::exists(draft)) GTEST_SKIP() << "../shared is absent";
  TempDir root;
  ASSERT_TRUE(Decompose(target, root.Path("wide"), DecomposeOptions{}).ok());
  ASSERT_TRUE(Decompose(draft, root.Path("stories"), DecomposeOptions{}).ok());
  const std::vector<std::string> prompts = {"Once upon a time", "Lily and Ben", "The little dog was", "One day"};
  for (const int tree : {0, 16}) {
    RuntimeOptions o = TestRuntimeOptions(root.path().string());
    o.model = "wide";
    o.draft_model = "stories";
    o.speculation.tree_nodes = tree;
    auto runtime = RuntimeImpl::Create(o, FileLayerStream::Factory());
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    std::vector<std::shared_ptr<CollectingSink>> plain, solo, together;
    for (const std::string& prompt : prompts) {
      GenerateJob job = GreedyJob(prompt, 48);
      job.sampling.top_logprobs = 3;
      job.draft_model = "none";
      plain.push_back(Submit(**runtime, job));
      ASSERT_TRUE(plain.back()->Wait());
      job.draft_model = "";
      solo.push_back(Submit(**runtime, job));
      ASSERT_TRUE(solo.back()->Wait());
    }
    for (const std::string& prompt : prompts) {
      GenerateJob job = GreedyJob(prompt, 48);
      job.sampling.top_logprobs = 3;
      together.push_back(Submit(**runtime, job));
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::string what = prompts[i] + (tree > 0 ? ", tree" : ", linear");
      ExpectSameOutput(*plain[i], *solo[i], what);
      ASSERT_TRUE(together[i]->Wait());
      ExpectSameOutput(*plain[i], *together[i], what + ", 4 sessions");
      const JobStats& s = solo[i]->stats;
      std::printf("%s: accepted %d of %d (%.2f), %d target passes for %d tokens\n", what.c_str(), s.draft_accepted,
                  s.draft_proposed, Acceptance(s), s.target_passes, s.generated_tokens);
      if (tree == 0) {
        EXPECT_GT(Acceptance(s), 0.6) << what;
      }
      EXPECT_LT(s.target_passes * 2, s.generated_tokens) << what;
    }
  }
}

}  // namespace
}  // namespace octo::testing
