// Speculative decoding in octod as real processes: octod --draft-model with
// its loader, driven by octo-gen and octo-ctl. The served tokens are the
// in-process engine's (no draft) whether the model is resident or streamed,
// for eight clients at once, and with the loader killed mid-generation;
// octo-gen --stats and octo-ctl status report what the draft did; a request
// turns its draft off or picks another; bad draft flags and a draft with
// another vocabulary are named.
#include <signal.h>

#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tests/client/subprocess.h"
#include "tests/daemon/server/octod_harness.h"

namespace octo::testing {
namespace {

constexpr char kPrompt[] = "Once upon a time";
constexpr int kLayers = 6;

class OctodSpeculationTest : public OctodTest {
 protected:
  void SetUp() override {
    MakeModel("draft", 2);                          // a small model: the draft
    MakeWidenedModel("m", "draft", kLayers, 0.02f);  // the target: it widened, perturbed (mostly agrees)
    MakeModel("qwen", 1, "Q8_0", "tiny-qwen2");  // another vocabulary (600 tokens)
  }
  RunResult Greedy(const std::string& prompt, int n, std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {prompt, "--temp", "0", "-n", std::to_string(n), "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return octod_.Gen(args);
  }
};

TEST_F(OctodSpeculationTest, ServedTokensAreTheEnginesAndStatsSayWhatTheDraftDid) {
  const std::vector<int> engine = EngineTokens(ModelDir("m"), kPrompt, 40);
  ASSERT_EQ(engine.size(), 40u);
  for (const std::vector<std::string>& streaming : {std::vector<std::string>{}, StreamEveryLayer("m")}) {
    std::vector<std::string> extra = {"--draft-model", "draft", "--draft-max", "6"};
    extra.insert(extra.end(), streaming.begin(), streaming.end());
    ASSERT_TRUE(octod_.Start(ServeArgs("m", extra)));
    EXPECT_NE(octod_.Log().find("speculative decoding: draft model draft"), std::string::npos) << octod_.Log();
    const RunResult r = Greedy(kPrompt, 40, {"--stats"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(TokenIds(r.out), engine) << (streaming.empty() ? "resident" : "streamed");
    const nlohmann::json stats = DoneEvent(r.out)["stats"];
    EXPECT_EQ(stats["draft_model"], "draft");
    EXPECT_GT(stats["draft_proposed"].get<int>(), 0);
    EXPECT_LT(stats["target_passes"].get<int>(), 40) << "accepted drafts save passes";
    EXPECT_NE(r.err.find("draft draft: proposed"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("passes per token"), std::string::npos) << r.err;

    const nlohmann::json status = octod_.Status();
    EXPECT_EQ(status["model"]["draft_model"], "draft");
    const nlohmann::json& spec = status["speculation"];
    EXPECT_TRUE(spec["present"].get<bool>());
    EXPECT_EQ(JsonU64(spec["proposed"]), static_cast<uint64_t>(stats["draft_proposed"].get<int>()));
    EXPECT_GT(spec["tokens_per_round"].get<double>(), 1.0);
    const RunResult text = octod_.Ctl("status");
    EXPECT_NE(text.out.find("speculative draft draft"), std::string::npos) << text.out;

    // This request without a draft: the same tokens, one pass each.
    const RunResult off = Greedy(kPrompt, 40, {"--draft-model", "none"});
    ASSERT_EQ(off.exit_code, 0) << off.err;
    EXPECT_EQ(TokenIds(off.out), engine);
    EXPECT_EQ(DoneEvent(off.out)["stats"]["target_passes"].get<int>(), 40);
    ASSERT_TRUE(octod_.Stop());
  }
}

TEST_F(OctodSpeculationTest, EightClientsWithDraftsGetTheirSoloTokens) {
  ASSERT_TRUE(octod_.Start(ServeArgs("m", [&] {
    std::vector<std::string> extra = StreamEveryLayer("m");
    extra.insert(extra.end(), {"--draft-model", "draft", "--draft-tree", "12"});
    return extra;
  }())));
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "In a small town", "She opened",
                                            "One day", "The sun was hot", "Tom and Sam", "A big red ball"};
  constexpr int kTokens = 20;
  std::vector<std::vector<int>> alone;
  for (const std::string& p : prompts) alone.push_back(TokenIds(Greedy(p, kTokens, {"--draft-model", "none"}).out));
  std::vector<std::vector<std::string>> runs;
  for (const std::string& p : prompts) runs.push_back({p, "--temp", "0", "-n", std::to_string(kTokens), "--json"});
  const std::vector<RunResult> results = octod_.GenConcurrently(runs);
  int batch_peak = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(results[i].exit_code, 0) << results[i].err;
    EXPECT_EQ(TokenIds(results[i].out), alone[i]) << prompts[i];
    batch_peak = std::max(batch_peak, DoneEvent(results[i].out)["stats"]["batch_peak"].get<int>());
  }
  EXPECT_GE(batch_peak, 2) << "no client shared a pass";
}

TEST_F(OctodSpeculationTest, KilledLoaderMidGenerationKeepsTheTokens) {
  std::vector<std::string> extra = StreamEveryLayer("m");
  extra.insert(extra.end(), {"--draft-model", "draft"});
  ASSERT_TRUE(octod_.Start(ServeArgs("m", extra)));
  const std::vector<int> expected = TokenIds(Greedy("The little dog", 48).out);
  ASSERT_EQ(expected.size(), 48u);
  const pid_t loader = octod_.Status()["loader"]["pid"].get<int>();
  ASSERT_GT(loader, 0);
  std::unique_ptr<BackgroundRun> client =
      octod_.GenInBackground({"The little dog", "--temp", "0", "-n", "48", "--json"}, dir_.Path("gen"));
  ASSERT_TRUE(WaitFor([&] { return TokenIds(client->Out()).size() >= 8; }, std::chrono::seconds(60)));
  ::kill(loader, SIGKILL);
  const RunResult r = client->Wait();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(TokenIds(r.out), expected);
  EXPECT_GE(octod_.Status()["loader"]["restarts"].get<int>(), 1);
}

TEST_F(OctodSpeculationTest, LoadTakesADraftAndRefusesAnotherVocabulary) {
  ASSERT_TRUE(octod_.Start(ServeArgs("")));
  const RunResult refused = octod_.Ctl("load", {"m", "--draft-model", "qwen"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("vocabulary differs"), std::string::npos) << refused.err;
  const RunResult loaded = octod_.Ctl("load", {"m", "--draft-model", "draft"});
  ASSERT_EQ(loaded.exit_code, 0) << loaded.err;
  EXPECT_NE(loaded.out.find("draft model draft"), std::string::npos) << loaded.out;
  // A request may bring its own draft (here the target drafting for itself).
  const RunResult own = Greedy(kPrompt, 16, {"--draft-model", "m"});
  ASSERT_EQ(own.exit_code, 0) << own.err;
  const nlohmann::json stats = DoneEvent(own.out)["stats"];
  EXPECT_EQ(stats["draft_model"], "m");
  EXPECT_EQ(stats["draft_accepted"], stats["draft_proposed"]) << "the model drafting for itself is always right";
  const RunResult bad = Greedy(kPrompt, 4, {"--draft-model", "qwen"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("vocabulary"), std::string::npos) << bad.err;
  const RunResult too_long = Greedy(kPrompt, 4, {"--draft-max", "40"});
  EXPECT_NE(too_long.exit_code, 0);
  EXPECT_NE(too_long.err.find("draft-max"), std::string::npos) << too_long.err;
}

TEST_F(OctodSpeculationTest, BadDraftFlagsAreNamed) {
  for (const auto& [flag, value, needle] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"--draft-max", "0", "draft-max"},
           {"--draft-max", "32", "draft-max"},
           {"--draft-tree", "64", "draft-tree"},
           {"--draft-branches", "0", "draft-branches"},
           {"--draft-model", "../m", "draft-model"}}) {
    const RunResult r = RunCommand({OctodPath(), "--socket", dir_.Path("x.sock"), "--models-root", dir_.Path("root"),
                                    flag, value});
    EXPECT_NE(r.exit_code, 0) << flag << " " << value;
    EXPECT_NE((r.err + r.out).find(needle), std::string::npos) << flag << ": " << r.err;
  }
  // A draft whose vocabulary is not the model's: octod does not start, and says why.
  const RunResult r = RunCommand({OctodPath(), "--socket", dir_.Path("y.sock"), "--models-root", dir_.Path("root"),
                                  "--model", "m", "--draft-model", "qwen", "--backend", "cpu"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE((r.err + r.out).find("vocabulary differs from the target's: 600 tokens"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace octo::testing
