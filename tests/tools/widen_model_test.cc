// Widening (tests/tools/widen_model.h) on the engine: a generated tiny llama
// widened 4x (dim 1024, 32/16 heads, ffn 3072, 2 identity layers more) gives
// the tiny model's greedy tokens and logits; extra layers with norm 0.02
// perturb it without losing it; every shape or file that cannot be widened
// is refused naming what is wrong.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "daemon/engine/model.h"
#include "gtest/gtest.h"
#include "kernels/ops.h"
#include "storage/decompose.h"
#include "storage/gguf.h"
#include "storage/model_config.h"
#include "storage/status_macros.h"
#include "tests/daemon/engine/engine_test_util.h"
#include "tests/storage/test_models.h"
#include "tests/temp_dir.h"
#include "tests/tools/widen_model.h"

namespace octo::testing {
namespace {

constexpr int kNewTokens = 24;
const std::vector<int32_t> kPrompt = {1, 72, 301, 15, 88, 260};

// tiny (dim 256, heads 8/4 x 32, ffn 768, 2 layers) widened 4x, 2 layers more.
WidenOptions WideTiny(float extra_layer_norm = 0) {
  return WidenOptions{.dim = 1024,
                      .hidden_dim = 3072,
                      .n_layers = 4,
                      .n_heads = 32,
                      .n_kv_heads = 16,
                      .extra_layer_norm = extra_layer_norm,
                      .name = "tiny-x4"};
}

absl::StatusOr<std::unique_ptr<Model>> OpenGguf(const std::string& gguf, const std::string& dir) {
  OCTO_RETURN_IF_ERROR(Decompose(gguf, dir, DecomposeOptions{}).status());
  return Model::Open(dir, ModelOptions{});
}

// Largest |a - b| over the range of b.
double RelativeMaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
  const auto [lo, hi] = std::minmax_element(b.begin(), b.end());
  return diff / (static_cast<double>(*hi) - *lo);
}

// A tiny model of the parameter's type and its greedy run; WidenAndRun writes
// a wide one next to it and runs that.
class WidenRunTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    GenerateModel(tmp_.Path("small.gguf"), "tiny", GetParam());
    auto small = OpenGguf(tmp_.Path("small.gguf"), tmp_.Path("small"));
    ASSERT_TRUE(small.ok()) << small.status();
    small_ = std::move(*small);
    auto run = Greedy(*small_, kPrompt, kNewTokens);
    ASSERT_TRUE(run.ok()) << run.status();
    small_run_ = std::move(*run);
  }

  std::unique_ptr<Model> Widen(const WidenOptions& options) {
    const absl::Status status = WidenModel(tmp_.Path("small.gguf"), options, tmp_.Path("wide.gguf"), /*seed=*/7);
    EXPECT_TRUE(status.ok()) << status;
    auto wide = OpenGguf(tmp_.Path("wide.gguf"), tmp_.Path("wide"));
    EXPECT_TRUE(wide.ok()) << wide.status();
    return wide.ok() ? std::move(*wide) : nullptr;
  }

  TempDir tmp_;
  std::unique_ptr<Model> small_;
  GreedyRun small_run_;
};

// Every logit of every step within 1e-4 of the step's logit range (the
// padding adds exact zeros and the norms scale by powers of 2, so only the
// order of float sums could differ; measured: 0 for F32, Q8_0 and Q4_K).
TEST_P(WidenRunTest, WideModelGivesTheSmallModelsTokensAndLogits) {
  std::unique_ptr<Model> wide = Widen(WideTiny());
  ASSERT_NE(wide, nullptr);
  const ModelConfig& c = wide->config();
  EXPECT_EQ(c.dim, 1024u);
  EXPECT_EQ(c.hidden_dim, 3072u);
  EXPECT_EQ(c.n_layers, 4u);
  EXPECT_EQ(c.n_heads, 32u);
  EXPECT_EQ(c.n_kv_heads, 16u);
  EXPECT_EQ(c.head_dim, 32u);
  EXPECT_EQ(c.vocab_size, 512u);
  EXPECT_EQ(c.norm_eps, small_->config().norm_eps / 4);
  EXPECT_EQ(c.name, "tiny-x4 widened from tiny");

  auto run = Greedy(*wide, kPrompt, kNewTokens);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->tokens, small_run_.tokens);
  double worst = 0;
  for (int i = 0; i < kNewTokens; ++i) worst = std::max(worst, RelativeMaxDiff(run->logits[i], small_run_.logits[i]));
  std::printf("%s: largest logit difference %.3g of the logit range\n", GetParam(), worst);
  EXPECT_LE(worst, 1e-4);
}

// Extra layers with a small norm weight add a perturbation: the logits move,
// the top token mostly stays. Agreement is counted teacher-forced (the wide
// model reads the small model's greedy sequence), so one miss does not change
// every later context. These random models keep a small residual stream (rms
// ~0.1) and flat logits, so 0.05 is already a large perturbation here.
// Measured over wide seeds 7, 8, 9, positions agreeing of 29:
//   norm   F32      Q8_0     Q4_K     (largest logit difference / range)
//   0.01   25-26    27-29    28       0.013-0.042
//   0.02   21-23    26-28    26-28    0.023-0.083
//   0.05   13-17    20-22    25-28    0.052-0.19
// Greedy runs part sooner: at 0.02 after 2-3 tokens (F32), 0-22 (Q8_0), 10 (Q4_K).
TEST_P(WidenRunTest, ExtraLayerNormPerturbsButMostlyAgrees) {
  std::unique_ptr<Model> wide = Widen(WideTiny(/*extra_layer_norm=*/0.02f));
  ASSERT_NE(wide, nullptr);
  std::vector<int32_t> sequence = kPrompt;
  sequence.insert(sequence.end(), small_run_.tokens.begin(), small_run_.tokens.end() - 1);
  auto small_rows = TeacherForced(*small_, sequence);
  auto wide_rows = TeacherForced(*wide, sequence);
  ASSERT_TRUE(small_rows.ok()) << small_rows.status();
  ASSERT_TRUE(wide_rows.ok()) << wide_rows.status();
  int agree = 0;
  double worst = 0;
  for (size_t i = 0; i < sequence.size(); ++i) {
    agree += Argmax((*small_rows)[i]) == Argmax((*wide_rows)[i]);
    worst = std::max(worst, RelativeMaxDiff((*wide_rows)[i], (*small_rows)[i]));
  }
  auto run = Greedy(*wide, kPrompt, kNewTokens);
  ASSERT_TRUE(run.ok()) << run.status();
  const int prefix = static_cast<int>(
      std::mismatch(run->tokens.begin(), run->tokens.end(), small_run_.tokens.begin()).first - run->tokens.begin());
  std::printf("%s: top token agrees at %d of %zu positions; greedy agrees on %d of %d; largest logit "
              "difference %.3g of the range\n",
              GetParam(), agree, sequence.size(), prefix, kNewTokens, worst);
  EXPECT_GT(worst, 1e-2) << "the extra layers changed (next to) nothing";
  EXPECT_GE(2 * agree, static_cast<int>(sequence.size())) << "the extra layers drowned the small model";
}

INSTANTIATE_TEST_SUITE_P(Types, WidenRunTest, ::testing::Values("F32", "Q8_0", "Q4_K"));

// Tied embeddings stay tied: token_embd, zero-padded, is the output
// projection of both models.
TEST(WidenModelTest, TiedEmbeddingsStayTied) {
  TempDir tmp;
  GenerateModel(tmp.Path("small.gguf"), "tiny", "Q8_0", [](ModelShape& s) { s.tied_embeddings = true; });
  ASSERT_TRUE(WidenModel(tmp.Path("small.gguf"), WideTiny(), tmp.Path("wide.gguf"), 1).ok());
  auto small = OpenGguf(tmp.Path("small.gguf"), tmp.Path("small"));
  auto wide = OpenGguf(tmp.Path("wide.gguf"), tmp.Path("wide"));
  ASSERT_TRUE(small.ok()) << small.status();
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_TRUE((*wide)->config().tied_embeddings);
  auto small_run = Greedy(**small, kPrompt, kNewTokens);
  auto wide_run = Greedy(**wide, kPrompt, kNewTokens);
  ASSERT_TRUE(small_run.ok() && wide_run.ok());
  EXPECT_EQ(wide_run->tokens, small_run->tokens);
}

// Padding relies on it: zero bytes decode to zeros, for every type.
TEST(WidenModelTest, ZeroBytesAreAZeroBlockOfEveryType) {
  constexpr int64_t kCols = 256;  // a whole number of blocks of every type
  for (const GgmlTypeInfo& type : AllGgmlTypes()) {
    EXPECT_TRUE(ZeroBytesAreZeroBlock(type.type)) << type.name;
    const std::vector<uint8_t> zeros(RowBytes(type.type, kCols), 0);
    std::vector<float> out(kCols, 1.0f);
    const WeightMatrix w{.type = type.type, .data = zeros.data(), .rows = 1, .cols = kCols};
    ASSERT_TRUE(cpu::DequantizeRows(w, 0, 1, out.data()).ok()) << type.name;
    for (float v : out) ASSERT_EQ(v, 0.0f) << type.name;
  }
}

// Widening `small` with `options` is INVALID_ARGUMENT naming `what`, and
// writes nothing.
void ExpectRefused(const std::string& small, const WidenOptions& options, absl::string_view what) {
  TempDir tmp;
  const absl::Status status = WidenModel(small, options, tmp.Path("wide.gguf"), 1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(what), absl::string_view::npos) << "want '" << what << "' in: " << status;
  EXPECT_FALSE(std::filesystem::exists(tmp.Path("wide.gguf")));
}

TEST(WidenModelTest, RefusesShapesThatCannotHoldTheSmallModel) {
  TempDir tmp;
  GenerateModel(tmp.Path("small.gguf"), "tiny", "Q8_0");
  const std::string small = tmp.Path("small.gguf");
  const auto with = [](void (*edit)(WidenOptions&)) {
    WidenOptions o = WideTiny();
    edit(o);
    return o;
  };
  ExpectRefused(small, with([](WidenOptions& o) { o.dim = 512; }), "power-of-4");  // ratio 2
  ExpectRefused(small, with([](WidenOptions& o) { o.dim = 768; }), "power-of-4");  // ratio 3
  ExpectRefused(small, with([](WidenOptions& o) { o.dim = 128; }), "dim (128) is smaller");
  ExpectRefused(small, with([](WidenOptions& o) { o.hidden_dim = 512; }), "hidden_dim");
  ExpectRefused(small, with([](WidenOptions& o) { o.n_layers = 1; }), "n_layers");
  ExpectRefused(small, with([](WidenOptions& o) { o.n_heads = 4; }), "n_heads (4) is smaller");
  ExpectRefused(small, with([](WidenOptions& o) {
                  o.n_heads = 12;
                  o.n_kv_heads = 6;
                }), "n_heads (12) is not a multiple");
  ExpectRefused(small, with([](WidenOptions& o) { o.n_kv_heads = 6; }), "n_kv_heads (6) is not a multiple");
  ExpectRefused(small, with([](WidenOptions& o) { o.n_kv_heads = 32; }), "group size");  // 32/32: 1, not 2
  ExpectRefused(small, with([](WidenOptions& o) { o.head_dim = 64; }), "head_dim");
  ExpectRefused(small, with([](WidenOptions& o) { o.vocab_size = 600; }), "vocab_size");
  ExpectRefused(small, with([](WidenOptions& o) { o.extra_layer_norm = NAN; }), "extra_layer_norm");
}

TEST(WidenModelTest, RefusesModelsOtherThanDenseLlama) {
  TempDir tmp;
  for (const char* preset : {"tiny-qwen2", "tiny-qwen3", "tiny-qwen3moe", "tiny-qwen35"}) {
    GenerateModel(tmp.Path(preset), preset, "Q8_0");
    ExpectRefused(tmp.Path(preset), WideTiny(), "not supported");
  }
  GenerateModel(tmp.Path("moe.gguf"), "tiny-moe", "Q8_0");
  ExpectRefused(tmp.Path("moe.gguf"), WideTiny(), "mixture-of-experts");
}

// A small model whose vocabulary is not the generator's (two tokens swapped):
// the wide metadata would not be its vocabulary.
TEST(WidenModelTest, RefusesAVocabularyTheGeneratorDoesNotMake) {
  TempDir tmp;
  auto shape = FindPreset("tiny");
  ASSERT_TRUE(shape.ok());
  auto recipe = ParseTypeRecipe("Q8_0");
  ASSERT_TRUE(recipe.ok());
  auto vocab = MakeVocab(*shape);
  ASSERT_TRUE(vocab.ok());
  std::swap(vocab->tokens[300], vocab->tokens[301]);
  auto tensors = BuildTensorList(*shape, *recipe);
  ASSERT_TRUE(tensors.ok());
  GgufWriter writer;
  AddModelMetadata(*shape, *recipe, *vocab, writer);
  for (const TensorSpec& t : *tensors) ASSERT_TRUE(writer.AddTensor(t.name, t.type.type, t.dims).ok());
  Rng rng(1);
  ASSERT_TRUE(writer
                  .WriteFile(tmp.Path("small.gguf"),
                             [&](size_t i, uint64_t, std::span<uint8_t> out) {
                               return FillRandomBlocks((*tensors)[i].type, out, rng);
                             })
                  .ok());
  ExpectRefused(tmp.Path("small.gguf"), WideTiny(), "tokenizer.ggml.tokens");
}

}  // namespace
}  // namespace octo::testing
