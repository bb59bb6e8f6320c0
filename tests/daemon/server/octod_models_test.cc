// A newcomer's first hour, through the real binaries: a GGUF served directly
// (decomposed into the cache once, the folder's tokens), a load that fails
// leaving the old model serving, the names a model answers to, and a
// session kept by name across octo-gen runs.
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/client/subprocess.h"
#include "tests/daemon/server/octod_harness.h"

namespace octo::testing {
namespace {

namespace fs = std::filesystem;
constexpr char kPrompt[] = "Once upon a time";
constexpr int kTokens = 16;

std::vector<int> ServedTokens(const OctodProcess& octod, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {kPrompt, "--temp", "0", "-n", std::to_string(kTokens), "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const RunResult r = octod.Gen(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return TokenIds(r.out);
}

TEST_F(OctodTest, AGgufIsServedDirectlyAndASecondStartReusesItsCache) {
  MakeModel("m", 4);  // writes m.gguf beside root/, decomposes it to root/m
  const std::vector<int> engine = EngineTokens(ModelDir("m"), kPrompt, kTokens);
  ASSERT_FALSE(engine.empty());
  const std::string gguf = dir_.Path("m.gguf");
  ASSERT_TRUE(octod_.Start({"--model", gguf, "--backend", "cpu"}));
  EXPECT_EQ(ServedTokens(octod_), engine);
  EXPECT_TRUE(absl::StrContains(octod_.Log(), "m.gguf: decomposed into " + dir_.Path(".octo-cache/m-")))
      << octod_.Log();
  // Each request is a line of octod's log.
  EXPECT_TRUE(absl::StrContains(octod_.Log(), "gRPC Generate: model m.gguf, ")) << octod_.Log();
  EXPECT_TRUE(absl::StrContains(octod_.Log(), absl::StrCat(kTokens, " generated, "))) << octod_.Log();
  nlohmann::json status = octod_.Status();
  EXPECT_EQ(status["model"]["path"], "m.gguf") << status.dump();
  ASSERT_TRUE(octod_.Stop());

  ASSERT_TRUE(octod_.Start({"--model", gguf, "--backend", "cpu"}));
  EXPECT_TRUE(absl::StrContains(octod_.Log(), "m.gguf: using its decomposed copy")) << octod_.Log();
  EXPECT_EQ(ServedTokens(octod_, {"--model", "m.gguf"}), engine);
  // The GGUFs of the root are listed beside its layer directories.
  const RunResult models = octod_.Ctl("models");
  ASSERT_EQ(models.exit_code, 0) << models.err;
  EXPECT_TRUE(absl::StrContains(models.out, "m.gguf")) << models.out;
}

TEST_F(OctodTest, AFailedLoadKeepsTheOldModelServing) {
  MakeModel("good", 3);
  fs::copy(ModelDir("good"), ModelDir("broken"));
  fs::remove(ModelDir("broken") + "/embed.bin");
  // One model at a time: "broken" unloads "good" first, which loads again.
  ASSERT_TRUE(octod_.Start(ServeArgs("good", {"--max-loaded-models", "1"})));
  const std::vector<int> before = ServedTokens(octod_);
  ASSERT_FALSE(before.empty());
  const RunResult load = octod_.Ctl("load", {"broken"});
  EXPECT_EQ(load.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(load.err, "good is still loaded")) << load.err;
  EXPECT_TRUE(absl::StrContains(octod_.Log(), "loading broken failed: ")) << octod_.Log();
  EXPECT_EQ(octod_.Status()["model"]["path"], "good");
  EXPECT_EQ(ServedTokens(octod_), before);
}

TEST_F(OctodTest, OneModelAnswersToItsSpellingsAndSymlinkedFoldersLoad) {
  MakeModel("m", 3);
  TempDir elsewhere;
  fs::create_directory_symlink(ModelDir("m"), ModelDir("linked"));
  ASSERT_TRUE(octod_.Start(ServeArgs("./m/")));
  EXPECT_EQ(octod_.Status()["model"]["path"], "m");
  const std::vector<int> want = ServedTokens(octod_);
  for (const std::string name : {"m", "./m", "m:latest"}) {
    EXPECT_EQ(ServedTokens(octod_, {"--model", name}), want) << name;
  }
  EXPECT_TRUE(absl::StrContains(octod_.Log(), "loading m\n")) << "loaded once: " << octod_.Log();
  const RunResult load = octod_.Ctl("load", {"linked"});
  ASSERT_EQ(load.exit_code, 0) << load.err;
  EXPECT_EQ(ServedTokens(octod_), want);
  const RunResult typo = octod_.Ctl("load", {"linkde"});
  EXPECT_EQ(typo.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(typo.err, "did you mean 'linked'")) << typo.err;
}

// A session by name from the command line: three octo-gen runs continue one
// conversation, each reusing the cache the last one left; octo-ctl lists and
// closes it.
TEST_F(OctodTest, ANamedSessionOutlivesEachOctoGenRun) {
  MakeModel("m", 3);
  ASSERT_TRUE(octod_.Start(ServeArgs("m")));
  int cached = -1;
  for (const std::string prompt : {"Once upon a time", " there was", " a dog"}) {
    const RunResult r = octod_.Gen({prompt, "--session", "story", "--temp", "0", "-n", "4", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json done = DoneEvent(r.out);
    ASSERT_FALSE(done.is_null()) << r.out;
    const int now = done["stats"].value("cached_tokens", 0);
    if (cached >= 0) {
      EXPECT_GT(now, cached) << "each run continues the last: " << r.out;
    }
    cached = now;
  }
  const RunResult list = octod_.Ctl("sessions");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_TRUE(absl::StrContains(list.out, "story")) << list.out;
  const RunResult close = octod_.Ctl("sessions", {"close", "story"});
  EXPECT_EQ(close.exit_code, 0) << close.err;
  EXPECT_FALSE(absl::StrContains(octod_.Ctl("sessions").out, "story"));
  const RunResult again = octod_.Ctl("sessions", {"close", "story"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(again.err, "no session 'story'")) << again.err;
}

// octo-gen --chat on a terminal, as a person uses it: Ctrl-C stops the reply
// and the prompt comes back; Ctrl-C at the prompt ends octo-gen.
TEST_F(OctodTest, CtrlCInATerminalChatStopsOnlyTheReply) {
  MakeModel("m", 6);
  ASSERT_TRUE(octod_.Start(ServeArgs("m", StreamEveryLayer("m"))));
  TerminalRun chat({OctoGenPath(), "--socket", octod_.socket(), "--chat", "--temp", "0", "-n", "-1"});
  ASSERT_TRUE(chat.WaitFor("> ")) << chat.output();
  chat.Type("Tell me a long story\n");
  ASSERT_TRUE(chat.WaitFor("Tell me a long story")) << chat.output();  // the terminal's echo
  std::this_thread::sleep_for(std::chrono::milliseconds(500));          // the reply streams (to the context's end)
  chat.CtrlC();
  ASSERT_TRUE(chat.WaitFor("(reply stopped)")) << chat.output();
  ASSERT_TRUE(chat.WaitFor("> ")) << chat.output();
  chat.Type("/set temperature 0\n");
  ASSERT_TRUE(chat.WaitFor("(temperature set)")) << chat.output();
  ASSERT_TRUE(chat.WaitFor("> ")) << chat.output();
  chat.CtrlC();
  EXPECT_EQ(chat.Wait(), 130) << chat.output();
  EXPECT_EQ(octod_.Status()["sessions"].size(), 0u) << "the chat's session was closed";
}

}  // namespace
}  // namespace octo::testing
