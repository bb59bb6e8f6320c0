// octo-ctl run / perplexity as a user runs them: a real process on a
// decomposed model, checked on what it prints and how it exits.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "tests/client/subprocess.h"
#include "tests/shared_data.h"
#include "tests/storage/test_models.h"
#include "tests/temp_dir.h"

namespace octo::testing {
namespace {

const std::string kOctoCtl = OCTO_CTL_PATH;

class OctoCtlRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GenerateModel(tmp_.Path("m.gguf"), "tiny", "Q4_K_M");
    const RunResult r = RunCommand({kOctoCtl, "decompose", "-q", tmp_.Path("m.gguf"), tmp_.Path("m")});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  }

  nlohmann::json RunJson(std::vector<std::string> extra) {
    std::vector<std::string> argv = {kOctoCtl, "run", tmp_.Path("m"), "Once upon a time", "--json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const RunResult r = RunCommand(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  }

  static std::vector<int> Ids(const nlohmann::json& out) {
    std::vector<int> ids;
    for (const auto& t : out["tokens"]) ids.push_back(t["id"].get<int>());
    return ids;
  }

  TempDir tmp_;
};

TEST_F(OctoCtlRunTest, SameSeedSameTokensAndMaxTokensIsHonoured) {
  const nlohmann::json a = RunJson({"-n", "12", "--seed", "7", "--temp", "1.0"});
  const nlohmann::json b = RunJson({"-n", "12", "--seed", "7", "--temp", "1.0"});
  ASSERT_FALSE(a.is_discarded());
  EXPECT_EQ(Ids(a), Ids(b));
  EXPECT_LE(Ids(a).size(), 12u);
  if (Ids(a).size() == 12u) {
    EXPECT_EQ(a["finish_reason"], "length");
  }
  EXPECT_EQ(a["seed"], 7);
}

TEST_F(OctoCtlRunTest, StreamedUnderABudgetPrintsTheResidentTokens) {
  const nlohmann::json resident = RunJson({"-n", "10", "--temp", "0"});
  const nlohmann::json streamed = RunJson({"-n", "10", "--temp", "0", "--budget", "1M"});
  EXPECT_EQ(Ids(resident), Ids(streamed));
}

TEST_F(OctoCtlRunTest, LogprobsComeWithEachToken) {
  const nlohmann::json out = RunJson({"-n", "4", "--temp", "0", "--logprobs", "3"});
  ASSERT_FALSE(out["tokens"].empty());
  for (const auto& t : out["tokens"]) {
    ASSERT_EQ(t["top_logprobs"].size(), 3u);
    // Greedy: the chosen token is the most likely one.
    EXPECT_EQ(t["top_logprobs"][0][0], t["id"]);
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
  }
}

TEST_F(OctoCtlRunTest, BadFlagsAreNamedAndExitNonZero) {
  RunResult r = RunCommand({kOctoCtl, "run", tmp_.Path("m"), "hi", "--temp", "-1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE((r.err + r.out).find("temperature"), std::string::npos) << r.err << r.out;
  r = RunCommand({kOctoCtl, "run", tmp_.Path("m"), "hi", "--budget", "lots"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE((r.err + r.out).find("--budget"), std::string::npos) << r.err << r.out;
  r = RunCommand({kOctoCtl, "run", tmp_.Path("m"), "hi", "--budget", "1K"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE((r.err + r.out).find("largest layer"), std::string::npos) << r.err << r.out;
  r = RunCommand({kOctoCtl, "run", tmp_.Path("m"), "hi", "--chat", "--chat-template", "nonesuch"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE((r.err + r.out).find("chatml"), std::string::npos) << "lists the known names: " << r.err << r.out;
}

TEST_F(OctoCtlRunTest, PerplexityOverATextFile) {
  std::string text;
  for (int i = 0; i < 60; ++i) text += "Once upon a time there was a little girl who liked to play. ";
  std::ofstream(tmp_.Path("t.txt")) << text;
  RunResult r = RunCommand({kOctoCtl, "perplexity", tmp_.Path("m"), tmp_.Path("t.txt"), "--ctx", "64"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE((r.err + r.out).find("perplexity "), std::string::npos) << r.err << r.out;
  // Too short for one chunk: a clear error.
  std::ofstream(tmp_.Path("short.txt")) << "Once";
  r = RunCommand({kOctoCtl, "perplexity", tmp_.Path("m"), tmp_.Path("short.txt"), "--ctx", "64"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE((r.err + r.out).find("at least one chunk"), std::string::npos) << r.err << r.out;
}

// The trained model writes llama.cpp's story, greedy.
TEST(OctoCtlRunSharedTest, Stories260KGreedyIsLlamaCppsStory) {
  OCTO_REQUIRE_SHARED("models/stories260K.gguf");
  TempDir tmp;
  ASSERT_EQ(RunCommand({kOctoCtl, "decompose", "-q", SharedPath("models/stories260K.gguf"), tmp.Path("m")}).exit_code, 0);
  const RunResult r = RunCommand({kOctoCtl, "run", tmp.Path("m"), "Once upon a time", "-n", "20", "--temp", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE((r.err + r.out).find(", there was a little girl named Lily"), std::string::npos) << r.err << r.out;
}

// The perplexity a run prints, or -1.
double PrintedPerplexity(const RunResult& r) {
  const size_t at = r.out.find("perplexity ");
  return at == std::string::npos ? -1 : std::atof(r.out.c_str() + at + 11);
}

// octo-ctl perplexity over TinyStories text (../shared's stories written by
// stories260K) at each KV cache type, against f16's. Published llama.cpp
// measurements put a q8_0 cache within 0.1% of f16's perplexity and q4_0
// about 2% above it (8-9B models on wikitext); the limits are five times
// those: +0.5% and +10%. Measured: TinyStories-656K (head_dim 16, a block
// across two heads) q8_0 -0.05%, q4_0 +5.3%; stories260K q8_0 +0.28%. Not
// held: stories260K at q4_0 keys (+226%): with head_dim 8 one 32-value block
// spans four heads and 16 levels cannot serve them all; llama.cpp does not
// offer a quantized cache for heads under 32 values at all.
TEST(OctoCtlRunSharedTest, QuantizedKvCachePerplexityStaysNearF16s) {
  OCTO_REQUIRE_SHARED("models/TinyStories-656K-Q8_0.gguf");
  OCTO_REQUIRE_SHARED("models/lowbit/imatrix-text.txt");
  TempDir tmp;
  struct Case {
    const char* model;
    const char* type;
    double limit;  // relative increase
  };
  for (const char* model : {"TinyStories-656K-Q8_0", "stories260K"}) {
    ASSERT_EQ(RunCommand({kOctoCtl, "decompose", "-q", SharedPath(std::string("models/") + model + ".gguf"),
                          tmp.Path(model)})
                  .exit_code,
              0);
  }
  double f16 = 0;
  for (const Case& c : {Case{"TinyStories-656K-Q8_0", "f16", 0}, Case{"TinyStories-656K-Q8_0", "q8_0", 0.005},
                        Case{"TinyStories-656K-Q8_0", "q4_0", 0.10}, Case{"stories260K", "f16", 0},
                        Case{"stories260K", "q8_0", 0.005}}) {
    const RunResult r = RunCommand({kOctoCtl, "perplexity", tmp.Path(c.model), SharedPath("models/lowbit/imatrix-text.txt"),
                                    "--ctx", "256", "--cache-type-k", c.type, "--cache-type-v", c.type});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    const double ppl = PrintedPerplexity(r);
    ASSERT_GT(ppl, 1) << r.out;
    if (std::string(c.type) == "f16") {
      f16 = ppl;
      std::printf("%s f16: perplexity %.4f\n", c.model, ppl);
      continue;
    }
    const double increase = ppl / f16 - 1;
    std::printf("%s %s: perplexity %.4f, %+.2f%% over f16 (limit %+.1f%%)\n", c.model, c.type, ppl, 100 * increase,
                100 * c.limit);
    EXPECT_LE(increase, c.limit) << c.model << " " << c.type;
  }
}

}  // namespace
}  // namespace octo::testing
