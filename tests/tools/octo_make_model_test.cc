// octo-make-model as a benchmark author runs it: a real process, exit codes,
// and a file the GGUF reader and decompose accept.
#include <filesystem>

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

TEST(OctoMakeModelTest, ListsPresets) {
  RunResult r = RunCommand({kMakeModel, "--list-presets"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* name : {"llama-3.2-1b", "llama-3-8b", "llama-2-70b", "qwen2.5-7b", "mixtral-8x7b"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace octo
