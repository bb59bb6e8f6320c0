// octo-make-model as a benchmark author runs it: a real process, exit codes,
// and a file the GGUF reader and decompose accept.
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "storage/decompose.h"
#include "storage/gguf.h"
#include "tests/client/subprocess.h"
#include "tests/storage/test_models.h"

namespace octo {
namespace {

using ::octo::testing::RunCommand;
using ::octo::testing::RunResult;

const std::string kMakeModel = OCTO_MAKE_MODEL_PATH;

TEST(OctoMakeModelTest, WritesARealShapedModelWithOverrides) {
  testing::TempDir tmp;
  RunResult r = RunCommand({kMakeModel, "--preset", "qwen2.5-7b", "--type", "Q4_K_M", "--layers", "1", "--vocab",
                            "4096", "-o", tmp.Path("q.gguf")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote "), std::string::npos) << r.out;
  auto f = GgufFile::Open(tmp.Path("q.gguf"));
  ASSERT_TRUE(f.ok()) << f.status();
  auto c = ModelConfigFromGguf(*f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "qwen2");
  EXPECT_EQ(c->dim, 3584u);
  EXPECT_EQ(c->hidden_dim, 18944u);
  EXPECT_EQ(c->n_layers, 1u);
  EXPECT_EQ(c->vocab_size, 4096u);
  EXPECT_TRUE(PlanLayerDirectory(*f, "q.gguf").ok());
}

TEST(OctoMakeModelTest, BadFlagsAreNamedWithExitCodeTwo) {
  testing::TempDir tmp;
  RunResult preset = RunCommand({kMakeModel, "--preset", "gpt-9", "--type", "Q4_0", "-o", tmp.Path("x.gguf")});
  EXPECT_EQ(preset.exit_code, 2);
  EXPECT_NE(preset.err.find("gpt-9"), std::string::npos) << preset.err;
  RunResult type = RunCommand({kMakeModel, "--preset", "tiny", "--type", "Q7_Z", "-o", tmp.Path("x.gguf")});
  EXPECT_EQ(type.exit_code, 2);
  EXPECT_NE(type.err.find("Q7_Z"), std::string::npos) << type.err;
  RunResult missing = RunCommand({kMakeModel, "--preset", "tiny"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(tmp.Path("x.gguf")));
}

// --widen-from: a small llama (dim 64, heads 2/1, ffn 256) widened to the
// tiny preset's sizes (dim 256, heads 8/4, ffn 768) with one extra layer.
TEST(OctoMakeModelTest, WidensASmallModelToAPresetsShape) {
  testing::TempDir tmp;
  testing::GenerateModel(tmp.Path("small.gguf"), "tiny", "Q8_0", [](testing::ModelShape& s) {
    s.dim = 64;
    s.hidden_dim = 256;
    s.n_heads = 2;
    s.n_kv_heads = 1;
  });
  RunResult r = RunCommand({kMakeModel, "--preset", "tiny", "--layers", "3", "--widen-from", tmp.Path("small.gguf"),
                            "--extra-layer-norm", "0.05", "-o", tmp.Path("wide.gguf")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote "), std::string::npos) << r.out;
  auto f = GgufFile::Open(tmp.Path("wide.gguf"));
  ASSERT_TRUE(f.ok()) << f.status();
  auto c = ModelConfigFromGguf(*f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->dim, 256u);
  EXPECT_EQ(c->hidden_dim, 768u);
  EXPECT_EQ(c->n_layers, 3u);
  EXPECT_EQ(c->n_heads, 8u);
  EXPECT_EQ(c->n_kv_heads, 4u);
  EXPECT_EQ(c->vocab_size, 512u);
  EXPECT_EQ(f->FindTensor("blk.0.attn_q.weight")->type.type, GgmlType::kQ8_0);
  EXPECT_TRUE(PlanLayerDirectory(*f, "wide.gguf").ok());
  // The extra layer's norms are the flag's value.
  const GgufTensorInfo* norm = f->FindTensor("blk.2.ffn_norm.weight");
  ASSERT_NE(norm, nullptr);
  std::vector<float> values(256);
  const std::span<uint8_t> bytes(reinterpret_cast<uint8_t*>(values.data()), 4 * values.size());
  ASSERT_TRUE(f->ReadTensorData(*norm, 0, bytes).ok());
  for (float v : values) ASSERT_EQ(v, 0.05f);
}

TEST(OctoMakeModelTest, WidenFromRefusesTypesAndShapesItCannotWiden) {
  testing::TempDir tmp;
  testing::GenerateModel(tmp.Path("small.gguf"), "tiny", "Q8_0");
  RunResult type = RunCommand({kMakeModel, "--preset", "tiny", "--widen-from", tmp.Path("small.gguf"), "--type",
                               "Q4_0", "-o", tmp.Path("w.gguf")});
  EXPECT_EQ(type.exit_code, 2);
  EXPECT_NE(type.err.find("--type"), std::string::npos) << type.err;
  // llama-3.2-1b's dim 2048 is 8 times tiny's 256.
  RunResult dim = RunCommand(
      {kMakeModel, "--preset", "llama-3.2-1b", "--widen-from", tmp.Path("small.gguf"), "-o", tmp.Path("w.gguf")});
  EXPECT_EQ(dim.exit_code, 2);
  EXPECT_NE(dim.err.find("power-of-4"), std::string::npos) << dim.err;
  RunResult qwen = RunCommand(
      {kMakeModel, "--preset", "tiny-qwen2", "--widen-from", tmp.Path("small.gguf"), "-o", tmp.Path("w.gguf")});
  EXPECT_EQ(qwen.exit_code, 2);
  EXPECT_NE(qwen.err.find("qwen2"), std::string::npos) << qwen.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.Path("w.gguf")));
}

TEST(OctoMakeModelTest, ListsPresets) {
  RunResult r = RunCommand({kMakeModel, "--list-presets"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* name : {"llama-3.2-1b", "llama-3-8b", "llama-2-70b", "qwen2.5-7b", "mixtral-8x7b"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace octo
