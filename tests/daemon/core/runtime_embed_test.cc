// Embeddings through the runtime (Runtime::Embed): what the vectors are
// (the final-normed hidden state whose lm_head product is the model's
// logits; mean pooling the average of the per-token states; cls the first
// token's), that they do not depend on the batch or the chunking, what the
// API options do to them, that the inputs share forward passes, and the
// errors a client gets for bad requests.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/engine/context_limit.h"
#include "daemon/engine/model.h"
#include "daemon/tokenizer/tokenizer.h"
#include "kernels/ops.h"
#include "nlohmann/json.hpp"
#include "tests/daemon/core/core_test_util.h"
#include "tests/temp_dir.h"

namespace octo::testing {
namespace {

constexpr uint32_t kLayers = 4;

const std::vector<std::string> kTexts = {"Once upon a time", "The cat sat on the mat.", "A", "Tom and Lily went to the park to play."};

class RuntimeEmbedTest : public GeneratedModelTest<kLayers> {
 protected:
  static void SetUpTestSuite() {
    GeneratedModelTest<kLayers>::SetUpTestSuite();
    // The same model declaring mean, cls and rank pooling in its manifest.
    for (const char* pooling : {"mean", "cls", "rank"}) {
      const std::filesystem::path dir = model_dir_->Path(pooling);
      std::filesystem::copy(model_dir_->Path("m"), dir, std::filesystem::copy_options::recursive);
      nlohmann::json manifest;
      std::ifstream(dir / "manifest.json") >> manifest;
      manifest["config"]["pooling"] = pooling;
      std::ofstream(dir / "manifest.json", std::ios::trunc) << manifest.dump();
    }
  }

  std::unique_ptr<RuntimeImpl> Start(const std::string& model = "m", uint32_t embed_batch_tokens = 2048) {
    RuntimeOptions options = TestRuntimeOptions(model_dir_->path().string());
    options.model = model;
    options.embed_batch_tokens = embed_batch_tokens;
    auto runtime = RuntimeImpl::Create(options, FileLayerStream::Factory());
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    return runtime.ok() ? std::move(*runtime) : nullptr;
  }

  static EmbedJob Texts(std::vector<std::string> texts, bool normalize = true) {
    EmbedJob job;
    job.texts = std::move(texts);
    job.normalize = normalize;
    return job;
  }

  static std::vector<std::vector<float>> Embed(Runtime& runtime, const EmbedJob& job) {
    absl::StatusOr<EmbedResult> result = runtime.Embed(job, nullptr);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? result->embeddings : std::vector<std::vector<float>>{};
  }

  // The last-pooled raw embedding of each prefix of `tokens`: the hidden
  // state of each of its tokens (the model is causal).
  static std::vector<std::vector<float>> PrefixStates(Runtime& runtime, const std::vector<int32_t>& tokens) {
    EmbedJob job;
    job.normalize = false;
    for (size_t n = 1; n <= tokens.size(); ++n) job.token_inputs.emplace_back(tokens.begin(), tokens.begin() + n);
    return Embed(runtime, job);
  }

  static std::vector<int32_t> Tokens(Runtime& runtime, const std::string& text) {
    absl::StatusOr<std::vector<int32_t>> tokens = runtime.Tokenize(text, true, false, nullptr);
    EXPECT_TRUE(tokens.ok());
    return *tokens;
  }
};

double Norm(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return std::sqrt(sum);
}

// The last token's state, multiplied by the model's lm_head in double, is
// the logits row the engine computes for the same prompt: the embedding is
// the model's own final hidden state, not some other vector.
TEST_F(RuntimeEmbedTest, LastPoolingIsTheStateTheLogitsComeFrom) {
  auto runtime = Start();
  const std::vector<int32_t> prompt = Tokens(*runtime, kTexts[1]);
  EmbedJob job;
  job.token_inputs = {prompt};
  job.normalize = false;
  const std::vector<std::vector<float>> embedding = Embed(*runtime, job);
  ASSERT_EQ(embedding.size(), 1u);

  auto model = Model::Open(model_dir_->Path("m"), ModelOptions{.weights = {}, .n_threads = 2});
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& c = (*model)->config();
  ASSERT_EQ(embedding[0].size(), c.dim);
  auto kv = (*model)->NewCache(64);
  std::vector<float> logits;
  const SequenceStep step{.kv = kv.get(), .tokens = prompt};
  ASSERT_TRUE((*model)->Forward(std::span<const SequenceStep>(&step, 1), logits).ok());
  ASSERT_EQ(logits.size(), c.vocab_size);

  std::vector<float> lm_head(static_cast<size_t>(c.vocab_size) * c.dim);
  ASSERT_TRUE(cpu::DequantizeRows((*model)->weights().globals().lm_head, 0, c.vocab_size, lm_head.data()).ok());
  double scale = 0, worst = 0;
  for (uint32_t row = 0; row < c.vocab_size; ++row) {
    double dot = 0;
    for (uint32_t i = 0; i < c.dim; ++i) dot += static_cast<double>(lm_head[row * c.dim + i]) * embedding[0][i];
    scale = std::max(scale, std::abs(dot));
    worst = std::max(worst, std::abs(dot - logits[row]));
  }
  // The engine's product rounds the activations to 8 bits (Q8 dots, as
  // llama.cpp): a relative error of about 2^-7 of the largest term.
  EXPECT_GT(scale, 0);
  EXPECT_LT(worst, 0.02 * scale) << "largest logit " << scale;
}

// Mean pooling averages every token's state; cls takes the first token's.
// Each is checked against the per-token states the causal model gives its
// prefixes.
TEST_F(RuntimeEmbedTest, MeanAndClsPoolTheTokenStates) {
  auto last = Start();
  const std::vector<int32_t> tokens = Tokens(*last, kTexts[3]);
  const std::vector<std::vector<float>> states = PrefixStates(*last, tokens);
  ASSERT_EQ(states.size(), tokens.size());
  last.reset();

  EmbedJob job;
  job.token_inputs = {tokens};
  job.normalize = false;
  auto mean_runtime = Start("mean");
  const std::vector<std::vector<float>> mean = Embed(*mean_runtime, job);
  mean_runtime.reset();
  auto cls_runtime = Start("cls");
  const std::vector<std::vector<float>> cls = Embed(*cls_runtime, job);
  ASSERT_EQ(mean.size(), 1u);
  ASSERT_EQ(cls.size(), 1u);
  const double scale = Norm(states.back()) / std::sqrt(static_cast<double>(states.back().size()));
  for (size_t i = 0; i < mean[0].size(); ++i) {
    double sum = 0;
    for (const std::vector<float>& state : states) sum += state[i];
    ASSERT_NEAR(mean[0][i], sum / states.size(), 1e-4 * scale) << "value " << i;
    ASSERT_NEAR(cls[0][i], states[0][i], 1e-4 * scale) << "value " << i;
  }
}

// A batch gives each input the bits it gets alone; so do identical inputs,
// and an input fed in chunks (a small embed_batch_tokens) rather than at
// once.
TEST_F(RuntimeEmbedTest, BatchingAndChunkingKeepEveryBit) {
  for (const char* model : {"m", "mean"}) {
    SCOPED_TRACE(model);
    auto runtime = Start(model);
    std::vector<std::string> texts = kTexts;
    texts.push_back(kTexts[0]);
    const std::vector<std::vector<float>> batched = Embed(*runtime, Texts(texts, false));
    ASSERT_EQ(batched.size(), texts.size());
    for (size_t i = 0; i < kTexts.size(); ++i) {
      EXPECT_EQ(batched[i], Embed(*runtime, Texts({kTexts[i]}, false))[0]) << "input " << i;
    }
    EXPECT_EQ(batched[0], batched.back());
    runtime.reset();
    auto chunked = Start(model, /*embed_batch_tokens=*/3);
    const uint64_t passes = chunked->Report().passes;
    EXPECT_EQ(Embed(*chunked, Texts(texts, false)), batched);
    EXPECT_GT(chunked->Report().passes - passes, 10u) << "three tokens a pass";
  }
}

TEST_F(RuntimeEmbedTest, NormalisedAndCutToDimensions) {
  auto runtime = Start();
  const std::vector<float> raw = Embed(*runtime, Texts({kTexts[0]}, false))[0];
  const std::vector<float> unit = Embed(*runtime, Texts({kTexts[0]}))[0];
  ASSERT_EQ(unit.size(), raw.size());
  EXPECT_NEAR(Norm(unit), 1.0, 1e-5);
  EXPECT_GT(std::abs(Norm(raw) - 1.0), 1e-3);  // so normalising did something
  const double norm = Norm(raw);
  for (size_t i = 0; i < raw.size(); ++i) EXPECT_NEAR(unit[i], raw[i] / norm, 1e-6);

  EmbedJob cut = Texts({kTexts[0]});
  cut.dimensions = 8;
  const std::vector<float> short_unit = Embed(*runtime, cut)[0];
  ASSERT_EQ(short_unit.size(), 8u);
  EXPECT_NEAR(Norm(short_unit), 1.0, 1e-5);
  const double head_norm = Norm(std::vector<float>(raw.begin(), raw.begin() + 8));
  for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(short_unit[i], raw[i] / head_norm, 1e-6);
}

// One request's inputs go through the model in one pass (one read of each
// layer), and leave no cache and no session behind.
TEST_F(RuntimeEmbedTest, InputsShareOnePassAndLeaveNothingBehind) {
  auto runtime = Start();
  const uint64_t passes = runtime->Report().passes;
  ASSERT_EQ(Embed(*runtime, Texts(kTexts)).size(), kTexts.size());
  const RuntimeReport report = runtime->Report();
  EXPECT_EQ(report.passes, passes + 1);
  EXPECT_EQ(report.kv_used_bytes, 0u);
  EXPECT_TRUE(report.sessions.empty());
  EXPECT_EQ(report.jobs_running + report.jobs_waiting, 0u);
}

// Embedding inputs are not sessions: max_sessions (here a named session
// and a one-shot generation) does not limit them, and they run beside the
// generation, which keeps its tokens.
TEST_F(RuntimeEmbedTest, RunsBesideGenerationsAndSessions) {
  RuntimeOptions options = TestRuntimeOptions(model_dir_->path().string());
  options.model = "m";
  options.max_sessions = 2;
  auto created = RuntimeImpl::Create(options, FileLayerStream::Factory());
  ASSERT_TRUE(created.ok()) << created.status();
  RuntimeImpl& runtime = **created;
  const std::vector<int32_t> alone = RunGreedy(runtime, "Once upon a time", 16)->tokens;
  absl::StatusOr<SessionReport> session = runtime.CreateSession(64, "me");
  ASSERT_TRUE(session.ok()) << session.status();
  GenerateJob long_job = GreedyJob("Once upon a time", 16);
  auto generation = Submit(runtime, long_job);
  const std::vector<std::vector<float>> vectors = Embed(runtime, Texts(kTexts));
  EXPECT_EQ(vectors.size(), kTexts.size());
  ASSERT_TRUE(generation->Wait());
  EXPECT_TRUE(generation->status.ok()) << generation->status;
  EXPECT_EQ(generation->tokens, alone);
}

// A KV budget that holds only a few inputs' caches at once: the others wait
// for room instead of failing, and every vector is the one it is alone. A
// small embed_batch_tokens spreads the inputs over more passes.
TEST_F(RuntimeEmbedTest, InputsPastTheKvBudgetWaitForRoom) {
  auto reference = Start();
  std::vector<std::string> texts;
  for (int i = 0; i < 12; ++i) texts.push_back(kTexts[i % kTexts.size()]);
  const std::vector<std::vector<float>> want = Embed(*reference, Texts(texts));
  int longest = 0;
  for (const std::string& text : texts) longest = std::max<int>(longest, Tokens(*reference, text).size());
  reference.reset();

  auto model = Model::Open(model_dir_->Path("m"), ModelOptions{.weights = {}, .n_threads = 1});
  ASSERT_TRUE(model.ok()) << model.status();
  RuntimeOptions options = TestRuntimeOptions(model_dir_->path().string());
  options.model = "m";
  options.kv_budget_bytes = 3 * (*model)->NewCache(longest)->BytesAfterReserve(longest);
  options.embed_batch_tokens = 16;
  auto created = RuntimeImpl::Create(options, FileLayerStream::Factory());
  ASSERT_TRUE(created.ok()) << created.status();
  const uint64_t passes = (*created)->Report().passes;
  EXPECT_EQ(Embed(**created, Texts(texts)), want);
  const uint64_t used = (*created)->Report().passes - passes;
  EXPECT_GE(used, 4u) << "at most three inputs' caches fit at once";
  EXPECT_EQ((*created)->Report().kv_used_bytes, 0u);
}

TEST_F(RuntimeEmbedTest, BadRequestsGetNamedErrors) {
  auto runtime = Start();
  auto expect = [&](const EmbedJob& job, absl::StatusCode code, const std::string& words) {
    absl::StatusOr<EmbedResult> result = runtime->Embed(job, nullptr);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), code) << result.status();
    EXPECT_NE(result.status().message().find(words), std::string::npos) << result.status();
  };
  expect(EmbedJob{}, absl::StatusCode::kInvalidArgument, "no input");
  expect(Texts(std::vector<std::string>(kMaxEmbedInputs + 1, "a")), absl::StatusCode::kInvalidArgument, "2048");
  EmbedJob empty_tokens;
  empty_tokens.token_inputs = {{1, 2}, {}};
  expect(empty_tokens, absl::StatusCode::kInvalidArgument, "input[1] is empty");
  EmbedJob bad_token;
  bad_token.token_inputs = {{1, 1 << 30}};
  expect(bad_token, absl::StatusCode::kInvalidArgument, "outside the vocabulary");
  EmbedJob wide = Texts({"a"});
  wide.dimensions = 1 << 20;
  expect(wide, absl::StatusCode::kInvalidArgument, "dimensions");
  EmbedJob other = Texts({"a"});
  other.model = "no-such-model";
  expect(other, absl::StatusCode::kNotFound, "no-such-model");

  // Longer than the context: refused, or cut when asked.
  EmbedJob long_input = Texts({kTexts[3]});
  long_input.context_length = 4;
  absl::StatusOr<EmbedResult> refused = runtime->Embed(long_input, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(IsContextExceeded(refused.status())) << refused.status();
  long_input.truncate = true;
  absl::StatusOr<EmbedResult> cut = runtime->Embed(long_input, nullptr);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_TRUE(cut->truncated);
  EXPECT_EQ(cut->input_tokens, std::vector<int>{4});
  const std::vector<int32_t> all = Tokens(*runtime, kTexts[3]);
  EmbedJob first_four;
  first_four.token_inputs = {std::vector<int32_t>(all.begin(), all.begin() + 4)};
  first_four.normalize = true;
  EXPECT_EQ(Embed(*runtime, first_four), cut->embeddings);

  // The runtime still serves.
  EXPECT_EQ(Embed(*runtime, Texts({"still here"})).size(), 1u);
  runtime.reset();
  runtime = Start("rank");
  expect(Texts({"a"}), absl::StatusCode::kFailedPrecondition, "reranker");
}

TEST_F(RuntimeEmbedTest, CancelledRequestEndsCancelled) {
  auto runtime = Start();
  absl::StatusOr<EmbedResult> result = runtime->Embed(Texts(kTexts), [] { return true; });
  // Cancelled before its pass, or done if the pass was quicker: never hangs.
  if (!result.ok()) {
    EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled) << result.status();
  }
  EXPECT_EQ(runtime->Report().kv_used_bytes, 0u);
  EXPECT_EQ(Embed(*runtime, Texts({"after"})).size(), 1u);
}

}  // namespace
}  // namespace octo::testing
