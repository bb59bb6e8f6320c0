// The encoders' pass (bert, nomic-bert: forward_encoder.cc) on the CPU
// backend and, built as cuda_encoder_forward_test, the CUDA one: against
// the double-precision reference (encoder_reference.h), against itself
// (batched or alone, resident or streamed), and its refusals.
#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/engine/backend_setup.h"
#include "daemon/engine/model.h"
#include "daemon/engine/model_files.h"
#include "daemon/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "storage/decompose.h"
#include "tests/daemon/engine/encoder_reference.h"
#include "tests/temp_dir.h"
#include "tests/tools/model_presets.h"
#include "tests/tools/model_tensors.h"

#ifndef OCTO_TEST_BACKEND
#define OCTO_TEST_BACKEND "cpu"
#endif

namespace octo::testing {
namespace {

constexpr const char* kPresets[] = {"tiny-bert", "tiny-nomic-bert"};

// A sentence-like input: [CLS]-ish first id, varied ids, a last id.
std::vector<int32_t> Tokens(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 37 + salt * 101 + 11) % 600);
  return t;
}

double Cosine(std::span<const float> a, std::span<const double> b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += a[i] * b[i], aa += double{a[i]} * a[i], bb += b[i] * b[i];
  return ab / std::sqrt(aa * bb);
}

class EncoderForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(OCTO_TEST_BACKEND) == "cuda" && UsableCudaDevices() == 0) GTEST_SKIP() << "no CUDA device";
  }
  std::string Gguf(const std::string& preset, const std::string& type) {
    const std::string path = tmp_.Path(absl::StrCat(preset, "-", type, ".gguf"));
    if (!std::ifstream(path)) {
      absl::StatusOr<ModelPlan> plan = PlanModel(*FindPreset(preset), *ParseTypeRecipe(type));
      EXPECT_TRUE(plan.ok()) << plan.status();
      EXPECT_TRUE(WriteModel(*plan, path, /*seed=*/1).ok());
    }
    return path;
  }
  std::unique_ptr<Model> Open(const std::string& preset, const std::string& type,
                              uint64_t layer_budget = kUnlimitedBudget) {
    const std::string dir = tmp_.Path(absl::StrCat(preset, "-", type));
    if (!std::ifstream(dir + "/manifest.json")) {
      absl::StatusOr<Manifest> m = Decompose(Gguf(preset, type), dir, DecomposeOptions{});
      EXPECT_TRUE(m.ok()) << m.status();
    }
    ModelOptions options;
    options.backend = OCTO_TEST_BACKEND;
    options.weights.layer_budget_bytes = layer_budget;
    absl::StatusOr<std::unique_ptr<Model>> model = Model::Open(dir, options);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? std::move(*model) : nullptr;
  }
  // Every token's state for each sequence, run together in one pass.
  std::vector<std::vector<float>> Hidden(Model& model, const std::vector<std::vector<int32_t>>& sequences) {
    std::vector<std::unique_ptr<KvCache>> caches;
    std::vector<SequenceStep> steps;
    for (const std::vector<int32_t>& tokens : sequences) {
      caches.push_back(model.NewCache(static_cast<int>(tokens.size())));
      steps.push_back(SequenceStep{.kv = caches.back().get(), .tokens = tokens, .all_logits = true, .hidden = true});
    }
    std::vector<float> logits, hidden;
    const absl::Status status = model.Forward(steps, logits, &hidden);
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_TRUE(logits.empty());
    std::vector<std::vector<float>> out;
    const size_t dim = model.config().dim;
    size_t row = 0;
    for (const std::vector<int32_t>& tokens : sequences) {
      out.emplace_back(hidden.begin() + row * dim, hidden.begin() + (row + tokens.size()) * dim);
      row += tokens.size();
    }
    return out;
  }

  TempDir tmp_;
};

// The largest |engine - reference| over every token's state (LayerNorm
// outputs: values of order 1).
double WorstDiff(std::span<const float> engine, const std::vector<std::vector<double>>& reference) {
  double worst = 0;
  for (size_t t = 0; t < reference.size(); ++t) {
    for (size_t i = 0; i < reference[t].size(); ++i) {
      worst = std::max(worst, std::abs(engine[t * reference[t].size() + i] - reference[t][i]));
    }
  }
  return worst;
}

TEST_F(EncoderForwardTest, MatchesTheDoubleReference) {
  for (const char* preset : kPresets) {
    SCOPED_TRACE(preset);
    std::unique_ptr<Model> model = Open(preset, "F32");
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(model->config().pooling, Pooling::kMean);
    auto ref = EncoderReference::Load(Gguf(preset, "F32"));
    ASSERT_TRUE(ref.ok()) << ref.status();
    auto causal = EncoderReference::Load(Gguf(preset, "F32"), {.causal = true});
    ASSERT_TRUE(causal.ok()) << causal.status();
    const std::vector<int32_t> tokens = Tokens(40, 1);
    const std::vector<float> engine = Hidden(*model, {tokens})[0];
    // fp16 keys, values and q (the cache) and GELU's fp16 rounding (as
    // llama.cpp's CPU) put the engine about 1e-3 from the exact pass.
    const double worst = WorstDiff(engine, (*ref)->Hidden(tokens));
    const double wrong = WorstDiff(engine, (*causal)->Hidden(tokens));
    EXPECT_LT(worst, 0.02);
    EXPECT_GT(wrong, 20 * worst) << "a causal pass is not told apart";
    // The mean-pooled embedding, as the APIs return it.
    std::vector<float> pooled(model->config().dim, 0.0f);
    std::vector<double> sum(pooled.size(), 0.0);
    for (size_t t = 0; t < tokens.size(); ++t) {
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += engine[t * sum.size() + i];
    }
    for (size_t i = 0; i < sum.size(); ++i) pooled[i] = static_cast<float>(sum[i]);
    const double cosine = Cosine(pooled, (*ref)->Embedding(tokens, "mean"));
    EXPECT_GT(cosine, 0.99999);
    std::printf("%s: worst state difference %.2e (causal variant %.2e), embedding cosine 1 - %.1e\n", preset, worst,
                wrong, 1 - cosine);
  }
}

// llama.cpp's ids and embeddings for the same generated models
// (tests/data/llamacpp-encoders.jsonl; README.md there says how).
TEST_F(EncoderForwardTest, MatchesLlamaCpp) {
  std::ifstream in(OCTO_ENCODER_REFERENCE);
  ASSERT_TRUE(in) << OCTO_ENCODER_REFERENCE;
  int records = 0;
  double worst_cosine = 1, worst_diff = 0;
  for (std::string line; std::getline(in, line); ++records) {
    const nlohmann::json r = nlohmann::json::parse(line);
    const std::string preset = r["preset"], type = r["type"], prompt = r["prompt"];
    SCOPED_TRACE(absl::StrCat(preset, " ", type, " \"", prompt, "\""));
    std::ifstream gguf(Gguf(preset, type), std::ios::ate | std::ios::binary);
    ASSERT_EQ(static_cast<uint64_t>(gguf.tellg()), r["gguf_bytes"].get<uint64_t>()) << "the generator changed";
    std::unique_ptr<Model> model = Open(preset, type);
    ASSERT_NE(model, nullptr);
    absl::StatusOr<Tokenizer> tokenizer = Tokenizer::FromMetadata(model->manifest().tokenizer);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    const std::vector<int32_t> tokens = tokenizer->Encode(prompt, /*add_special=*/true, /*parse_special=*/false);
    ASSERT_EQ(tokens, r["tokens"].get<std::vector<int32_t>>());
    // Mean-pooled, unit length, as llama-embedding --embd-normalize 2.
    const std::vector<float> states = Hidden(*model, {tokens})[0];
    const size_t dim = model->config().dim;
    std::vector<double> pooled(dim, 0.0);
    for (size_t t = 0; t < tokens.size(); ++t) {
      for (size_t i = 0; i < dim; ++i) pooled[i] += states[t * dim + i];
    }
    double norm = 0;
    for (double v : pooled) norm += v * v;
    const std::vector<float> want = r["embedding"].get<std::vector<float>>();
    std::vector<float> got(dim);
    for (size_t i = 0; i < dim; ++i) got[i] = static_cast<float>(pooled[i] / std::sqrt(norm));
    double diff = 0;
    for (size_t i = 0; i < dim; ++i) diff = std::max(diff, std::abs(double{got[i]} - want[i]));
    std::vector<double> want_double(want.begin(), want.end());
    const double cosine = Cosine(got, want_double);
    EXPECT_GT(cosine, 0.99999);
    EXPECT_LT(diff, 1e-3);
    worst_cosine = std::min(worst_cosine, cosine);
    worst_diff = std::max(worst_diff, diff);
  }
  EXPECT_EQ(records, 12);
  std::printf("llama.cpp: %d embeddings, worst cosine 1 - %.1e, worst value difference %.1e\n", records,
              1 - worst_cosine, worst_diff);
}

TEST_F(EncoderForwardTest, LearnedPositionsCount) {
  std::unique_ptr<Model> model = Open("tiny-bert", "F32");
  ASSERT_NE(model, nullptr);
  auto ref = EncoderReference::Load(Gguf("tiny-bert", "F32"));
  auto no_positions = EncoderReference::Load(Gguf("tiny-bert", "F32"), {.skip_positions = true});
  ASSERT_TRUE(ref.ok() && no_positions.ok());
  const std::vector<int32_t> tokens = Tokens(12, 2);
  const std::vector<float> engine = Hidden(*model, {tokens})[0];
  EXPECT_GT(WorstDiff(engine, (*no_positions)->Hidden(tokens)), 20 * WorstDiff(engine, (*ref)->Hidden(tokens)));
}

TEST_F(EncoderForwardTest, BatchedGivesEachSequenceItsBitsAlone) {
  for (const char* preset : kPresets) {
    SCOPED_TRACE(preset);
    std::unique_ptr<Model> model = Open(preset, "Q8_0");
    ASSERT_NE(model, nullptr);
    const std::vector<std::vector<int32_t>> inputs = {Tokens(9, 3), Tokens(30, 4), Tokens(1, 5)};
    const std::vector<std::vector<float>> together = Hidden(*model, inputs);
    ASSERT_EQ(together.size(), inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::vector<float> alone = Hidden(*model, {inputs[i]})[0];
      ASSERT_EQ(alone.size(), together[i].size());
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), together[i].begin(),
                             [](float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }))
          << "input " << i;
    }
  }
}

TEST_F(EncoderForwardTest, StreamedEqualsResident) {
  std::unique_ptr<Model> resident = Open("tiny-nomic-bert", "Q4_K_M");
  ASSERT_NE(resident, nullptr);
  // Room for one layer: every layer is read in during each pass.
  const std::vector<uint64_t> sizes = *LayerFileSizes(resident->manifest());
  std::unique_ptr<Model> streamed = Open("tiny-nomic-bert", "Q4_K_M", *std::max_element(sizes.begin(), sizes.end()));
  ASSERT_NE(streamed, nullptr);
  const std::vector<int32_t> tokens = Tokens(17, 6);
  EXPECT_EQ(Hidden(*resident, {tokens}), Hidden(*streamed, {tokens}));
}

TEST_F(EncoderForwardTest, RefusesWhatAnEncoderCannotDo) {
  std::unique_ptr<Model> model = Open("tiny-bert", "Q8_0");
  ASSERT_NE(model, nullptr);
  const std::vector<int32_t> tokens = Tokens(5, 8);
  std::vector<float> logits, hidden;
  std::unique_ptr<KvCache> kv = model->NewCache(16);
  // Logits: an encoder has no lm_head.
  SequenceStep step{.kv = kv.get(), .tokens = tokens};
  absl::Status s = model->Forward(std::span<const SequenceStep>(&step, 1), logits, &hidden);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("embeddings only"), std::string::npos) << s;
  // A second step on the same cache: a sequence comes whole.
  step.hidden = step.all_logits = true;
  ASSERT_TRUE(model->Forward(std::span<const SequenceStep>(&step, 1), logits, &hidden).ok());
  s = model->Forward(std::span<const SequenceStep>(&step, 1), logits, &hidden);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("whole"), std::string::npos) << s;
  // Longer than the learned positions.
  const std::vector<int32_t> too_long = Tokens(model->config().context_length + 1, 9);
  std::unique_ptr<KvCache> big = model->NewCache(static_cast<int>(too_long.size()));
  SequenceStep long_step{.kv = big.get(), .tokens = too_long, .all_logits = true, .hidden = true};
  s = model->Forward(std::span<const SequenceStep>(&long_step, 1), logits, &hidden);
  EXPECT_FALSE(s.ok());
  // The model still works after each refusal.
  EXPECT_EQ(Hidden(*model, {tokens})[0].size(), tokens.size() * model->config().dim);
}

}  // namespace
}  // namespace octo::testing
