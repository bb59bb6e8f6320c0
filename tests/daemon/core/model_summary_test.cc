// What listings (octo-ctl models, Ollama's /api/tags and /api/show) say of a
// model directory: its parameter count and its quantization.
#include <algorithm>

#include <gtest/gtest.h>

#include "daemon/core/loaded_model.h"
#include "storage/byte_size.h"
#include "storage/decompose.h"
#include "storage/llama_file_type.h"
#include "storage/manifest.h"
#include "tests/daemon/core/core_test_util.h"
#include "tests/shared_data.h"
#include "tests/temp_dir.h"

namespace octo::testing {
namespace {

Manifest MakeManifest(const TempDir& dir, const std::string& type) {
  MakeModelDir(dir.path().string(), "m", "tiny", type, 2);
  absl::StatusOr<Manifest> manifest = ReadManifest(dir.Path("m"));
  EXPECT_TRUE(manifest.ok()) << manifest.status();
  return manifest.ok() ? *std::move(manifest) : Manifest();
}

void DropFileType(Manifest& manifest) {
  std::erase_if(manifest.metadata, [](const auto& kv) { return kv.first == "general.file_type"; });
}

TEST(ModelSummaryTest, ALlamaCountsEveryWeight) {
  TempDir dir;
  const Manifest manifest = MakeManifest(dir, "Q8_0");
  // The "tiny" preset: dim 256, ffn 768, 2 layers, 8 heads and 4 KV heads of
  // 32, vocab 512, separate output matrix.
  const uint64_t dim = 256, ffn = 768, vocab = 512, q = 8 * 32, kv = 4 * 32;
  const uint64_t per_layer = dim + dim * q + 2 * dim * kv + q * dim + dim + 3 * dim * ffn;
  const uint64_t expected = 2 * vocab * dim + dim + 2 * per_layer;
  const ModelSummary summary = SummarizeManifest(manifest, "m");
  EXPECT_EQ(summary.n_params, expected);
  EXPECT_EQ(ParameterSizeLabel(summary.n_params), "1.8M");
}

TEST(ModelSummaryTest, QuantizationIsTheFileTypesName) {
  for (const auto& [type, name] : std::vector<std::pair<std::string, std::string>>{
           {"Q4_K_M", "Q4_K_M"}, {"Q8_0", "Q8_0"}, {"Q4_K", "Q4_K_S"}, {"F16", "F16"}, {"IQ4_XS", "IQ4_XS"}}) {
    TempDir dir;
    EXPECT_EQ(SummarizeManifest(MakeManifest(dir, type), "m").quantization, name) << type;
  }
}

TEST(ModelSummaryTest, WithoutAKnownFileTypeTheCommonestMatrixTypeIsNamed) {
  TempDir dir;
  Manifest manifest = MakeManifest(dir, "Q5_0");
  DropFileType(manifest);
  EXPECT_EQ(SummarizeManifest(manifest, "m").quantization, "Q5_0") << "norms are F32, but they are vectors";
  manifest.metadata.emplace_back("general.file_type", GgufValue::Uint(GgufValueType::kUint32, 999));
  EXPECT_EQ(SummarizeManifest(manifest, "m").quantization, "Q5_0") << "a file type llama.cpp does not define";
}

TEST(ModelSummaryTest, FileTypeNames) {
  EXPECT_EQ(LlamaFileTypeName(0), "F32");
  EXPECT_EQ(LlamaFileTypeName(15), "Q4_K_M");
  EXPECT_EQ(LlamaFileTypeName(32), "BF16");
  EXPECT_EQ(LlamaFileTypeName(4), "") << "removed from llama.cpp";
  EXPECT_EQ(LlamaFileTypeName(1u << 31), "");
}

// stories260K counts 292.8K here: its GGUF stores output.weight as well as
// token_embd.weight (64 x 512 more), which the "260K" of its name leaves out.
TEST(ModelSummaryTest, SharedModels) {
  OCTO_REQUIRE_SHARED("models/stories260K.gguf");
  struct Case {
    std::string gguf, params, quantization;
  };
  for (const Case& c : std::vector<Case>{{"models/stories260K.gguf", "292.8K", "F32"},
                                         {"models/TinyStories-656K-Q8_0.gguf", "656.0K", "Q8_0"},
                                         {"models/widened/llama-Q4_K_M-mix.gguf", "", "Q4_K_M"}}) {
    TempDir dir;
    absl::StatusOr<Manifest> manifest = Decompose(SharedPath(c.gguf), dir.Path("m"), DecomposeOptions{});
    ASSERT_TRUE(manifest.ok()) << c.gguf << ": " << manifest.status();
    const ModelSummary summary = SummarizeManifest(*manifest, "m");
    if (!c.params.empty()) {
      EXPECT_EQ(ParameterSizeLabel(summary.n_params), c.params) << c.gguf;
    }
    EXPECT_EQ(summary.quantization, c.quantization) << c.gguf;
  }
}

}  // namespace
}  // namespace octo::testing
