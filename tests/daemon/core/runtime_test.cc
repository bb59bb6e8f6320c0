// The runtime as a client sees it (without gRPC): tokens equal the engine's,
// streamed equals resident, concurrent jobs get their solo tokens, sessions
// keep their cache, and bad requests, full budgets and damaged files get
// the errors they should while the runtime keeps serving.
#include <algorithm>
#include <bit>
#include <fstream>
#include <mutex>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/engine/context_limit.h"
#include "daemon/engine/generation.h"
#include "daemon/engine/model.h"
#include "daemon/tokenizer/tokenizer.h"
#include "tests/daemon/core/core_test_util.h"
#include "tests/temp_dir.h"

namespace octo::testing {
namespace {

constexpr uint32_t kLayers = 6;

class RuntimeTest : public GeneratedModelTest<kLayers> {
 protected:

  std::unique_ptr<RuntimeImpl> Start(RuntimeOptions options) {
    options.model = "m";
    auto runtime = RuntimeImpl::Create(options, FileLayerStream::Factory());
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    return runtime.ok() ? std::move(*runtime) : nullptr;
  }
  std::unique_ptr<RuntimeImpl> Start() { return Start(TestRuntimeOptions(model_dir_->path().string())); }

  // The engine alone (octo-ctl run's path): greedy tokens for `prompt`.
  static std::vector<int32_t> EngineTokens(const std::string& prompt, int n) {
    auto model = Model::Open(model_dir_->Path("m"), ModelOptions{.weights = {}, .n_threads = 2});
    EXPECT_TRUE(model.ok()) << model.status();
    auto tokenizer = Tokenizer::FromMetadata((*model)->manifest().tokenizer);
    SamplingParams params;
    params.temperature = 0;
    params.max_tokens = n;
    auto generation = Generation::Create(*tokenizer, params, tokenizer->Encode(prompt, true, false), 512);
    std::vector<int32_t> tokens;
    EXPECT_TRUE(Generate(**model, *generation, [&](const GeneratedToken& t) {
                  tokens.push_back(t.id);
                  return true;
                }).ok());
    return tokens;
  }

  // The engine alone, every logits row whole (Generate takes them so):
  // the tokens `params` draws for `prompt`.
  static std::vector<GeneratedToken> EngineRun(const std::string& prompt, const SamplingParams& params) {
    auto model = Model::Open(model_dir_->Path("m"), ModelOptions{.weights = {}, .n_threads = 2});
    EXPECT_TRUE(model.ok()) << model.status();
    auto tokenizer = Tokenizer::FromMetadata((*model)->manifest().tokenizer);
    auto generation = Generation::Create(*tokenizer, params, tokenizer->Encode(prompt, true, false), 512);
    std::vector<GeneratedToken> tokens;
    EXPECT_TRUE(Generate(**model, *generation, [&](const GeneratedToken& t) {
                  tokens.push_back(t);
                  return true;
                }).ok());
    return tokens;
  }

  // The largest layer: a budget of one layer (nothing pinned) streams everything.
  static uint64_t LayerBytes() { return LargestLayerBytes(model_dir_->Path("m")); }
};

TEST_F(RuntimeTest, GreedyTokensEqualTheEngine) {
  auto runtime = Start();
  auto sink = RunGreedy(*runtime, "Once upon a time", 24);
  EXPECT_TRUE(sink->status.ok()) << sink->status;
  EXPECT_EQ(sink->tokens, EngineTokens("Once upon a time", 24));
  EXPECT_EQ(sink->finish_reason, "length");
  EXPECT_EQ(sink->stats.generated_tokens, 24);
  EXPECT_EQ(sink->started, 1);
  EXPECT_TRUE(sink->session_id.empty());
}

TEST_F(RuntimeTest, TopLogprobsCarryEachAlternativesText) {
  auto runtime = Start();
  GenerateJob job;
  job.prompt = "Once upon a time";
  job.sampling.temperature = 0;
  job.sampling.max_tokens = 4;
  job.sampling.top_logprobs = 3;
  auto sink = std::make_shared<CollectingSink>();
  ASSERT_TRUE(runtime->Submit(job, sink).ok());
  ASSERT_TRUE(sink->Wait());
  ASSERT_EQ(sink->generated.size(), 4u);
  std::vector<std::string> pieces;
  for (const GeneratedToken& t : sink->generated) {
    ASSERT_EQ(t.top.size(), 3u);
    EXPECT_EQ(t.top[0].id, t.id);  // greedy: the most likely one
    EXPECT_DOUBLE_EQ(t.top[0].logprob, t.logprob);
    auto text = runtime->Detokenize({t.top[1].id});
    EXPECT_EQ(t.top[1].text, *text);
  }
}

// The scheduler takes greedy and top-k steps' logits rows reduced to their
// candidates (logit_candidates.h), the engine's Generate takes them whole:
// the same tokens, and logprobs bit for bit (the CPU backend sums in
// LogSumExp's order). Penalties need the whole row: the same tokens that
// way too.
TEST_F(RuntimeTest, CandidatesGiveTheWholeRowsTokensAndLogprobs) {
  auto runtime = Start();
  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.top_logprobs = 4;
  SamplingParams top_k = greedy;
  top_k.temperature = 0.9;
  top_k.top_k = 20;
  top_k.seed = 77;
  SamplingParams penalised = top_k;
  penalised.repeat_penalty = 1.3;
  for (const SamplingParams& params : {greedy, top_k, penalised}) {
    GenerateJob job;
    job.prompt = "Once upon a time";
    job.sampling = params;
    job.sampling.max_tokens = 12;
    auto sink = std::make_shared<CollectingSink>();
    ASSERT_TRUE(runtime->Submit(job, sink).ok());
    ASSERT_TRUE(sink->Wait());
    ASSERT_TRUE(sink->status.ok()) << sink->status;
    const std::vector<GeneratedToken> want = EngineRun(job.prompt, job.sampling);
    ASSERT_EQ(sink->generated.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const GeneratedToken& got = sink->generated[i];
      EXPECT_EQ(got.id, want[i].id) << "token " << i;
      EXPECT_EQ(std::bit_cast<uint64_t>(got.logprob), std::bit_cast<uint64_t>(want[i].logprob)) << "token " << i;
      ASSERT_EQ(got.top.size(), want[i].top.size());
      for (size_t j = 0; j < want[i].top.size(); ++j) {
        EXPECT_EQ(got.top[j].id, want[i].top[j].id) << "token " << i;
        EXPECT_EQ(std::bit_cast<uint64_t>(got.top[j].logprob), std::bit_cast<uint64_t>(want[i].top[j].logprob));
      }
    }
  }
}

TEST_F(RuntimeTest, StreamedThroughAOneLayerBudgetEqualsResident) {
  RuntimeOptions options = TestRuntimeOptions(model_dir_->path().string());
  options.pin_first = 0;
  options.pin_last = 0;
  options.layer_budget_bytes = LayerBytes();
  auto runtime = Start(options);
  const RuntimeReport report = runtime->Report();
  EXPECT_EQ(report.residency.resident_layers, 0u);
  EXPECT_EQ(report.residency.ring_slots, 1u);
  EXPECT_LE(report.residency.peak_bytes, LayerBytes());
  auto sink = RunGreedy(*runtime, "The little dog", 20);
  EXPECT_EQ(sink->tokens, EngineTokens("The little dog", 20));
  const RuntimeReport after = runtime->Report();
  EXPECT_GT(after.loader.bytes_read, 0u);
  EXPECT_GE(after.layers[3].loads, 20u);
  EXPECT_LE(after.residency.peak_bytes, LayerBytes());
}

TEST_F(RuntimeTest, ConcurrentJobsGetTheirSoloTokens) {
  auto runtime = Start();
  const std::vector<std::string> prompts = {"Once", "The cat", "A big red", "Tom and", "She saw", "In the",
                                            "Lily", "One day, a"};
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (const std::string& p : prompts) sinks.push_back(Submit(*runtime, GreedyJob(p, 16)));
  int peak = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(sinks[i]->Wait());
    EXPECT_TRUE(sinks[i]->status.ok()) << sinks[i]->status;
    EXPECT_EQ(sinks[i]->tokens, EngineTokens(prompts[i], 16)) << prompts[i];
    peak = std::max(peak, sinks[i]->stats.batch_peak);
  }
  EXPECT_GT(peak, 1) << "the jobs never shared a pass";
}

TEST_F(RuntimeTest, SessionKeepsItsCacheBetweenTurns) {
  auto runtime = Start();
  auto session = runtime->CreateSession(0, "");
  ASSERT_TRUE(session.ok()) << session.status();
  auto first = RunGreedy(*runtime, "Once upon a time", 8, session->id);
  EXPECT_EQ(first->session_id, session->id);
  auto second = RunGreedy(*runtime, " there was", 8, session->id);
  ASSERT_TRUE(second->status.ok()) << second->status;
  EXPECT_GT(second->stats.cached_tokens, 0);

  // The same conversation as one prompt of token ids, in a fresh cache.
  std::vector<std::string> pieces;
  auto prompt = runtime->Tokenize("Once upon a time", true, false, &pieces);
  std::vector<int32_t> all = *prompt;
  all.insert(all.end(), first->tokens.begin(), first->tokens.end());
  auto more = runtime->Tokenize(" there was", false, false, &pieces);
  all.insert(all.end(), more->begin(), more->end());
  GenerateJob job = GreedyJob("", 8);
  job.prompt_tokens = all;
  auto sink = Submit(*runtime, job);
  ASSERT_TRUE(sink->Wait());
  EXPECT_EQ(sink->tokens, second->tokens);

  const RuntimeReport report = runtime->Report();
  ASSERT_EQ(report.sessions.size(), 1u);
  EXPECT_GT(report.sessions[0].positions, 16u);
  EXPECT_TRUE(runtime->CloseSession(session->id, "").ok());
  EXPECT_EQ(runtime->CloseSession(session->id, "").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(runtime->Report().kv_used_bytes, 0u);
}

TEST_F(RuntimeTest, NamedSessionsReopenPerCredential) {
  auto runtime = Start();
  auto opened = runtime->CreateSession(0, "token:1", "work");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_TRUE(opened->created);
  EXPECT_EQ(opened->id, "work");
  GenerateJob first = GreedyJob("Once upon a time", 8, "work");
  first.owner = "token:1";
  ASSERT_TRUE(Submit(*runtime, first)->Wait());
  // Opening it again returns it, cache and all.
  auto again = runtime->CreateSession(0, "token:1", "work");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_GT(again->positions, 8u);
  GenerateJob second = GreedyJob(" there was", 4, "work");
  second.owner = "token:1";
  const std::shared_ptr<CollectingSink> continued = Submit(*runtime, second);
  ASSERT_TRUE(continued->Wait());
  EXPECT_GT(continued->stats.cached_tokens, 0);
  // Another credential's "work" is its own session; the first stays private.
  auto other = runtime->CreateSession(0, "token:2", "work");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->created);
  EXPECT_EQ(runtime->Report().sessions.size(), 2u);
  EXPECT_TRUE(runtime->CloseSession("work", "token:2").ok());
  auto still = runtime->CreateSession(0, "token:1", "work");
  ASSERT_TRUE(still.ok());
  EXPECT_FALSE(still->created);
  EXPECT_GT(still->positions, again->positions);
  const std::vector<std::string> bad_names = {"has space", std::string(65, 'a'), "s0123456789abcdef0123456789abcdef",
                                              "a/b"};
  for (const std::string& bad : bad_names) {
    EXPECT_EQ(runtime->CreateSession(0, "token:1", bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST_F(RuntimeTest, IdleSessionsExpire) {
  RuntimeOptions options = TestRuntimeOptions(model_dir_->path().string());
  options.session_idle_timeout = absl::Milliseconds(200);
  auto runtime = Start(options);
  ASSERT_TRUE(runtime->CreateSession(0, "", "short").ok());
  ASSERT_TRUE(RunGreedy(*runtime, "Once", 2, "short")->status.ok());
  EXPECT_EQ(runtime->Report().sessions.size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_TRUE(runtime->Report().sessions.empty());
  EXPECT_EQ(runtime->Report().kv_used_bytes, 0u);
  GenerateJob gone = GreedyJob("x", 1, "short");
  EXPECT_EQ(runtime->Submit(gone, std::make_shared<CollectingSink>()).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RuntimeTest, ChatSessionReusesTheEarlierTurns) {
  auto runtime = Start();
  auto session = runtime->CreateSession(0, "");
  GenerateJob job;
  job.session_id = session->id;
  job.messages = {{"user", "Hello there"}};
  job.sampling.temperature = 0;
  job.sampling.max_tokens = 6;
  auto first = std::make_shared<CollectingSink>();
  ASSERT_TRUE(runtime->Submit(job, first).ok());
  ASSERT_TRUE(first->Wait());
  ASSERT_TRUE(first->status.ok()) << first->status;
  job.messages = {{"user", "And then?"}};
  auto second = std::make_shared<CollectingSink>();
  ASSERT_TRUE(runtime->Submit(job, second).ok());
  ASSERT_TRUE(second->Wait());
  ASSERT_TRUE(second->status.ok()) << second->status;
  EXPECT_GT(second->stats.cached_tokens, 5);
}

// add_bos false (Ollama's /api/generate continuing a context): the chat's
// rendering starts without BOS, whether the tokenizer would add it (chatml)
// or the template writes it (mistral-v7's "<s>").
TEST_F(RuntimeTest, AChatContinuingEarlierTokensGetsNoBos) {
  auto runtime = Start();
  for (const std::string chat_template : {"chatml", "mistral-v7"}) {
    GenerateJob job;
    job.chat = true;
    job.chat_template = chat_template;
    job.messages = {{"user", "Hi"}};
    absl::StatusOr<std::vector<int32_t>> fresh = runtime->PromptTokens(job);
    job.add_bos = false;
    absl::StatusOr<std::vector<int32_t>> continued = runtime->PromptTokens(job);
    ASSERT_TRUE(fresh.ok() && continued.ok()) << fresh.status() << continued.status();
    ASSERT_GT(fresh->size(), 1u);
    EXPECT_EQ(*continued, std::vector<int32_t>(fresh->begin() + 1, fresh->end())) << chat_template;
  }
}

TEST_F(RuntimeTest, CancelEndsTheJobAndFreesItsCache) {
  auto runtime = Start();
  auto sink = std::make_shared<CollectingSink>();
  auto handle = runtime->Submit(GreedyJob("Once upon a time", 400), sink);
  ASSERT_TRUE(handle.ok());
  ASSERT_TRUE(sink->WaitTokens(2));
  (*handle)->Cancel();
  ASSERT_TRUE(sink->Wait(10));
  EXPECT_EQ(sink->finish_reason, "cancelled");
  EXPECT_LT(sink->tokens.size(), 400u);
  EXPECT_EQ(runtime->Report().kv_used_bytes, 0u);
}

TEST_F(RuntimeTest, FullKvBudgetIsResourceExhaustedOrEvictsIdleSessions) {
  RuntimeOptions options = TestRuntimeOptions(model_dir_->path().string());
  auto manifest = ReadManifest(model_dir_->Path("m"));
  const ModelConfig& c = manifest->config;
  const uint64_t one_step = uint64_t{c.n_layers} * 2 * kKvGrowPositions * c.n_kv_heads * c.head_dim * 2;
  options.kv_budget_bytes = one_step + one_step / 2;  // one session's first step, not two
  auto runtime = Start(options);
  auto a = runtime->CreateSession(0, "");
  auto b = runtime->CreateSession(0, "");
  EXPECT_TRUE(RunGreedy(*runtime, "One", 2, a->id)->status.ok());
  auto refused = RunGreedy(*runtime, "Two", 2, b->id);
  EXPECT_EQ(refused->status.code(), absl::StatusCode::kResourceExhausted) << refused->status;
  EXPECT_NE(refused->status.message().find("kv_budget"), std::string::npos);

  options.evict_idle_sessions = true;
  runtime = Start(options);
  a = runtime->CreateSession(0, "");
  b = runtime->CreateSession(0, "");
  EXPECT_TRUE(RunGreedy(*runtime, "One", 2, a->id)->status.ok());
  EXPECT_TRUE(RunGreedy(*runtime, "Two", 2, b->id)->status.ok());
  GenerateJob job;
  job.session_id = a->id;
  job.prompt = "again";
  EXPECT_EQ(runtime->Submit(job, std::make_shared<CollectingSink>()).status().code(), absl::StatusCode::kNotFound);
}

// A one-shot job may use the model's whole trained context (not
// session_context, a new session's default), up to what the KV budget
// holds; a longer prompt is INVALID_ARGUMENT naming both sizes and what
// limits the context; with truncate_keep (Ollama) it is cut instead.
TEST_F(RuntimeTest, AOneShotJobUsesTheWholeContextAndALongerPromptIsRefusedOrCut) {
  RuntimeOptions options = TestRuntimeOptions(model_dir_->path().string());
  options.session_context = 16;
  std::vector<std::string> log;
  std::mutex log_mu;
  options.log = [&](absl::string_view line) {
    std::lock_guard<std::mutex> lock(log_mu);
    log.emplace_back(line);
  };
  auto runtime = Start(options);
  const int trained = static_cast<int>(runtime->Report().model->context_length);
  ASSERT_GT(trained, 600);
  auto job_of = [](int prompt_tokens, int max_tokens) {
    GenerateJob job = GreedyJob("", max_tokens);
    job.prompt.clear();
    for (int i = 0; i < prompt_tokens; ++i) job.prompt_tokens.push_back(5 + (i * 7) % 200);
    return job;
  };
  std::shared_ptr<CollectingSink> long_prompt = Submit(*runtime, job_of(300, 2));
  ASSERT_TRUE(long_prompt->Wait());
  EXPECT_TRUE(long_prompt->status.ok()) << long_prompt->status;
  EXPECT_EQ(long_prompt->stats.prompt_tokens, 300) << "past session_context (16)";

  absl::Status refused = runtime->Submit(job_of(trained + 1, 2), std::make_shared<CollectingSink>()).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_TRUE(IsContextExceeded(refused)) << refused;
  EXPECT_NE(refused.message().find(absl::StrCat(trained + 1, " tokens; the context holds ", trained)),
            std::string::npos)
      << refused;

  // Cut as Ollama cuts: the first 4 tokens and the newest, room for max_tokens.
  GenerateJob cut = job_of(200, 4);
  cut.context_length = 64;
  cut.truncate_keep = 4;
  std::shared_ptr<CollectingSink> truncated = Submit(*runtime, cut);
  ASSERT_TRUE(truncated->Wait());
  EXPECT_TRUE(truncated->status.ok()) << truncated->status;
  EXPECT_EQ(truncated->stats.prompt_tokens, 60);
  EXPECT_EQ(truncated->tokens.size(), 4u);
  {
    std::lock_guard<std::mutex> lock(log_mu);
    EXPECT_TRUE(std::any_of(log.begin(), log.end(), [](const std::string& line) {
      return line.find("truncating input prompt") != std::string::npos &&
             line.find("prompt 200 tokens, kept the first 4 and the last 56") != std::string::npos;
    }));
  }
  cut.context_length = 64;
  cut.truncate_keep.reset();
  refused = runtime->Submit(cut, std::make_shared<CollectingSink>()).status();
  EXPECT_TRUE(IsContextExceeded(refused)) << refused;
  EXPECT_NE(refused.message().find("the context the request asked for"), std::string::npos) << refused;

  // A KV budget of 512 positions for one sequence limits the context, and says so.
  auto manifest = ReadManifest(model_dir_->Path("m"));
  const ModelConfig& c = manifest->config;
  options.kv_budget_bytes = uint64_t{c.n_layers} * 2 * 2 * kKvGrowPositions * c.n_kv_heads * c.head_dim * 2;
  runtime = Start(options);
  refused = runtime->Submit(job_of(600, 2), std::make_shared<CollectingSink>()).status();
  EXPECT_TRUE(IsContextExceeded(refused)) << refused;
  EXPECT_NE(refused.message().find("600 tokens; the context holds 512"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("kv_budget"), std::string::npos) << refused;
  std::shared_ptr<CollectingSink> fits = Submit(*runtime, job_of(500, 2));
  ASSERT_TRUE(fits->Wait());
  EXPECT_TRUE(fits->status.ok()) << fits->status;
}

TEST_F(RuntimeTest, SetResidencyDuringAGenerationKeepsItsTokens) {
  RuntimeOptions options = TestRuntimeOptions(model_dir_->path().string());
  options.layer_budget_bytes = LayerBytes() * 3;  // pinned 0 and 5, one slot
  auto runtime = Start(options);
  GenerateJob job = GreedyJob("Once upon a time", 40);
  auto sink = Submit(*runtime, job);
  ASSERT_TRUE(sink->WaitTokens(5));
  ResidencyChange to_auto;
  to_auto.auto_budget = true;
  auto all = runtime->SetResidency(to_auto);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->streamed_layers, 0u);
  ASSERT_TRUE(sink->WaitTokens(15));
  ResidencyChange to_budget;
  to_budget.budget_bytes = LayerBytes() * 4;
  auto back = runtime->SetResidency(to_budget);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ring_slots, 2u);
  EXPECT_LE(back->held_bytes, LayerBytes() * 4);
  ASSERT_TRUE(sink->Wait());
  EXPECT_EQ(sink->tokens, EngineTokens("Once upon a time", 40));

  // A budget that cannot hold the pinned layers is refused; the plan stays.
  ResidencyChange too_small;
  too_small.pin_first = 3;
  too_small.budget_bytes = LayerBytes() * 2;
  auto refused = runtime->SetResidency(too_small);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(runtime->Report().residency.ring_slots, 2u);
}

TEST_F(RuntimeTest, DamagedStreamedLayerIsDataLossAndTheRuntimeServesOn) {
  TempDir tmp;
  MakeModelDir(tmp.path().string(), "m", "tiny", "Q8_0", 4);
  RuntimeOptions options = TestRuntimeOptions(tmp.path().string());
  options.pin_first = 0;
  options.pin_last = 0;
  options.layer_budget_bytes = ReadManifest(tmp.Path("m"))->Layer(0)->size;
  options.model = "m";
  auto runtime = RuntimeImpl::Create(options, FileLayerStream::Factory());
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  const std::string file = tmp.Path("m/layer_002.bin");
  std::string original;
  {
    std::ifstream in(file, std::ios::binary);
    original.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::string damaged = original;
  damaged[damaged.size() / 2] ^= 0x40;
  std::ofstream(file, std::ios::binary | std::ios::trunc) << damaged;
  auto sink = RunGreedy(**runtime, "Once", 4);
  EXPECT_EQ(sink->status.code(), absl::StatusCode::kDataLoss) << sink->status;
  EXPECT_NE(sink->status.message().find("layer_002.bin"), std::string::npos) << sink->status;
  std::ofstream(file, std::ios::binary | std::ios::trunc) << original;
  EXPECT_TRUE(RunGreedy(**runtime, "Once", 4)->status.ok());
}

TEST_F(RuntimeTest, BadRequestsAreRefusedWithTheFieldNamed) {
  auto runtime = Start();
  auto submit = [&](GenerateJob job) { return runtime->Submit(job, std::make_shared<CollectingSink>()).status(); };
  GenerateJob empty;
  EXPECT_EQ(submit(empty).code(), absl::StatusCode::kInvalidArgument);
  GenerateJob hot;
  hot.prompt = "x";
  hot.sampling.temperature = -1;
  const absl::Status bad = submit(hot);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("temperature"), std::string::npos) << bad;
  GenerateJob huge;
  huge.prompt = std::string(kMaxPromptBytes + 1, 'a');
  EXPECT_EQ(submit(huge).code(), absl::StatusCode::kInvalidArgument);
  GenerateJob out_of_vocab;
  out_of_vocab.prompt_tokens = {1, 1 << 30};
  EXPECT_EQ(submit(out_of_vocab).code(), absl::StatusCode::kInvalidArgument);
  GenerateJob unknown;
  unknown.prompt = "x";
  unknown.session_id = "nope";
  EXPECT_EQ(submit(unknown).code(), absl::StatusCode::kNotFound);
  GenerateJob bad_template;
  bad_template.messages = {{"user", "hi"}};
  bad_template.chat_template = "no-such-template";
  EXPECT_EQ(submit(bad_template).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime->LoadModel("../m", {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime->LoadModel("/etc", {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime->LoadModel("absent", {}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(runtime->Detokenize({-1}).status().code(), absl::StatusCode::kInvalidArgument);
  // A job for a model the root does not have is refused, naming it.
  GenerateJob other_model;
  other_model.prompt = "x";
  other_model.model = "other";
  const absl::Status refused = submit(other_model);
  EXPECT_EQ(refused.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(refused.message().find("other"), std::string::npos) << refused;
  // Still serving; naming the loaded model is fine.
  EXPECT_TRUE(RunGreedy(*runtime, "Once", 2)->status.ok());
  GenerateJob this_model = GreedyJob("Once", 2);
  this_model.model = "m";
  const std::shared_ptr<CollectingSink> ran = Submit(*runtime, this_model);
  ASSERT_TRUE(ran->Wait());
  EXPECT_TRUE(ran->status.ok()) << ran->status;
  EXPECT_EQ(ran->tokens.size(), 2u);
  ASSERT_TRUE(runtime->UnloadModel("").ok());
  GenerateJob fine;
  fine.prompt = "x";
  EXPECT_EQ(submit(fine).code(), absl::StatusCode::kFailedPrecondition);
  auto models = runtime->ListModels();
  ASSERT_TRUE(models.ok());
  ASSERT_EQ(models->size(), 2u);  // the directory and the GGUF it came from
  EXPECT_EQ((*models)[0].path, "m");
  EXPECT_FALSE((*models)[0].loaded);
  EXPECT_EQ((*models)[1].path, "m.gguf");
}

TEST_F(RuntimeTest, ShutdownEndsRunningJobsAndRefusesNewOnes) {
  auto runtime = Start();
  GenerateJob job = GreedyJob("Once", 400);
  auto sink = Submit(*runtime, job);
  ASSERT_TRUE(sink->WaitTokens(1));
  runtime->Shutdown();
  ASSERT_TRUE(sink->Wait(10));
  EXPECT_EQ(sink->finish_reason, "cancelled");
  EXPECT_EQ(runtime->Submit(job, std::make_shared<CollectingSink>()).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace octo::testing
