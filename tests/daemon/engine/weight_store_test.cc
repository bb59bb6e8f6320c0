// WeightStore: which layers stay under a budget, that streamed and resident
// weights give the same logits bit for bit, and that a damaged file is
// refused (DATA_LOSS) rather than computed with.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/engine/model.h"
#include "daemon/engine/weight_store.h"
#include "storage/decompose.h"
#include "tests/daemon/engine/engine_test_util.h"
#include "tests/daemon/engine/reference_records.h"
#include "tests/preset_param_name.h"
#include "tests/shared_data.h"
#include "tests/storage/test_models.h"
#include "tests/temp_dir.h"

namespace octo::testing {
namespace {

TEST(PlanResidency, EverythingFitsMeansNoStaging) {
  auto plan = PlanResidency({100, 100, 100}, 300);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->resident, (std::vector<bool>{true, true, true}));
  EXPECT_EQ(plan->staging_bytes, 0u);
  EXPECT_EQ(plan->held_bytes, 300u);
}

TEST(PlanResidency, OneLayerBudgetStreamsEveryLayer) {
  auto plan = PlanResidency({100, 120, 100, 100}, 120);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->resident, (std::vector<bool>{false, false, false, false}));
  EXPECT_EQ(plan->staging_bytes, 120u);
}

TEST(PlanResidency, KeepsFirstAndLastLayersFirst) {
  // Staging (100) + layer 0 + layer 5 + layer 1 fit in 400; layer 4 does not.
  auto plan = PlanResidency({100, 100, 100, 100, 100, 100}, 450);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->resident, (std::vector<bool>{true, true, false, false, false, true}));
  EXPECT_LE(plan->held_bytes, 450u);
}

TEST(PlanResidency, BudgetSmallerThanALayerIsRefused) {
  auto plan = PlanResidency({100, 200}, 199);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("largest layer (200 bytes)"), std::string::npos) << plan.status();
}

uint64_t LargestLayer(const Model& model) {
  uint64_t largest = 0;
  for (uint32_t l = 0; l < model.config().n_layers; ++l) largest = std::max(largest, model.manifest().Layer(l)->size);
  return largest;
}

// Greedy-decodes 12 tokens resident and with a budget of one layer, and
// requires every logit to be the same bits.
void ExpectStreamedEqualsResident(const std::string& dir, const std::vector<int32_t>& prompt) {
  auto resident = Model::Open(dir, ModelOptions{});
  ASSERT_TRUE(resident.ok()) << resident.status();
  ModelOptions streamed_options;
  streamed_options.weights.layer_budget_bytes = LargestLayer(**resident);
  auto streamed = Model::Open(dir, streamed_options);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  for (uint32_t l = 0; l < (*streamed)->config().n_layers; ++l) EXPECT_FALSE((*streamed)->store().IsResident(l));

  auto a = Greedy(**resident, prompt, 12);
  auto b = Greedy(**streamed, prompt, 12);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->tokens, b->tokens);
  for (size_t i = 0; i < a->logits.size(); ++i) {
    ASSERT_EQ(a->logits[i].size(), b->logits[i].size());
    EXPECT_EQ(0, std::memcmp(a->logits[i].data(), b->logits[i].data(), a->logits[i].size() * sizeof(float)))
        << "logits differ at step " << i;
  }
  EXPECT_EQ((*resident)->store().streamed_bytes(), 0u);
  EXPECT_GT((*streamed)->store().streamed_bytes(), 0u);
}

class StreamedSharedModel : public ::testing::TestWithParam<const char*> {};

TEST_P(StreamedSharedModel, OneLayerBudgetGivesResidentLogitsBitForBit) {
  OCTO_REQUIRE_SHARED(std::string("models/") + GetParam());
  ExpectStreamedEqualsResident(DecomposedSharedModel(GetParam()), {1, 80, 147, 201, 282, 57});
}

INSTANTIATE_TEST_SUITE_P(Models, StreamedSharedModel,
                         ::testing::Values("stories260K.gguf", "TinyStories-656K-Q8_0.gguf",
                                           "widened/llama-Q4_K_M-mix.gguf", "widened/moe-Q4_K_M-mix.gguf",
                                           "widened/qwen2-Q4_K_M-mix.gguf"),
                         [](const auto& info) { return std::to_string(info.index); });

// Generated models need no ../shared and cover qwen3 (q/k norm) and qwen3moe.
class StreamedGeneratedModel : public ::testing::TestWithParam<const char*> {};

TEST_P(StreamedGeneratedModel, OneLayerBudgetGivesResidentLogitsBitForBit) {
  TempDir tmp;
  GenerateModel(tmp.Path("m.gguf"), GetParam(), "Q4_K_M");
  auto decomposed = Decompose(tmp.Path("m.gguf"), tmp.Path("m"), DecomposeOptions{});
  ASSERT_TRUE(decomposed.ok()) << decomposed.status();
  ExpectStreamedEqualsResident(tmp.Path("m"), {1, 5, 9, 200, 3});
}

INSTANTIATE_TEST_SUITE_P(Presets, StreamedGeneratedModel,
                         ::testing::Values("tiny", "tiny-moe", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3moe"),
                         PresetParamName());

// Flips one byte of a layer file inside tensor data.
void Corrupt(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(8192);
  char c = 0;
  f.read(&c, 1);
  c ^= 0x10;
  f.seekp(8192);
  f.write(&c, 1);
}

TEST(WeightStoreDamage, ResidentLayerWithBadChecksumIsRefusedAtOpen) {
  TempDir tmp;
  GenerateModel(tmp.Path("m.gguf"), "tiny", "Q8_0");
  ASSERT_TRUE(Decompose(tmp.Path("m.gguf"), tmp.Path("m"), DecomposeOptions{}).ok());
  Corrupt(tmp.Path("m/layer_001.bin"));
  auto model = Model::Open(tmp.Path("m"), ModelOptions{});
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(model.status().message().find("layer_001.bin"), std::string::npos) << model.status();
}

TEST(WeightStoreDamage, StreamedLayerWithBadChecksumFailsThePassNotTheModel) {
  TempDir tmp;
  GenerateModel(tmp.Path("m.gguf"), "tiny", "Q8_0");
  ASSERT_TRUE(Decompose(tmp.Path("m.gguf"), tmp.Path("m"), DecomposeOptions{}).ok());
  ModelOptions options;
  options.weights.layer_budget_bytes = 1;  // too small: refused
  auto refused = Model::Open(tmp.Path("m"), options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);

  auto probe = Model::Open(tmp.Path("m"), ModelOptions{});
  ASSERT_TRUE(probe.ok());
  options.weights.layer_budget_bytes = LargestLayer(**probe);
  auto model = Model::Open(tmp.Path("m"), options);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<int32_t> prompt = {1, 5, 9};
  ASSERT_TRUE(Greedy(**model, prompt, 2).ok());

  Corrupt(tmp.Path("m/layer_001.bin"));
  auto run = Greedy(**model, prompt, 2);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(run.status().message().find("layer_001.bin"), std::string::npos) << run.status();
}

}  // namespace
}  // namespace octo::testing
