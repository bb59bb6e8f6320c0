// octo-gen and octo-ctl's daemon commands as real processes, talking to the
// service (FakeRuntime behind it) on a real unix socket in this process.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/client/subprocess.h"
#include "tests/daemon/server/test_server.h"

namespace octo::testing {
namespace {

const std::string kOctoGen = OCTO_GEN_PATH;
const std::string kOctoCtl = OCTO_CTL_PATH;

class DaemonClientsTest : public ::testing::Test {
 protected:
  DaemonClientsTest() {
    server_.runtime().SetModels({FakeModel("tiny"), FakeModel("big", "qwen2", 80)}, /*load_first=*/true);
    RuntimeReport report;
    report.layers.resize(4);
    report.layers[0].pinned = report.layers[0].resident = true;
    report.layers[3].pinned = report.layers[3].resident = true;
    report.layers[1].resident = true;
    report.backend = "cpu (fake)";
    server_.runtime().SetReport(report);
  }

  RunResult Gen(std::vector<std::string> args) {
    args.insert(args.begin(), {kOctoGen, "--socket", server_.socket_path()});
    return RunCommand(args);
  }

  RunResult Ctl(const std::string& command, std::vector<std::string> args = {}) {
    args.insert(args.begin(), {kOctoCtl, command, "--socket", server_.socket_path()});
    return RunCommand(args);
  }

  // `input` piped to octo-gen's stdin (through sh, which RunCommand runs).
  RunResult GenWithInput(const std::string& input, const std::string& args) {
    return RunCommand({"/bin/sh", "-c",
                       "printf '" + input + "' | '" + kOctoGen + "' --socket '" + server_.socket_path() + "' " + args});
  }

  TestServer server_;
};

TEST_F(DaemonClientsTest, GenStreamsTheReply) {
  const RunResult r = Gen({"Say hello", "--temp", "0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Hello, world\n");
  EXPECT_EQ(server_.runtime().last_job().sampling.temperature, 0);
}

TEST_F(DaemonClientsTest, GenChatFromAPipe) {
  const RunResult r = GenWithInput("one\\ntwo\\n", "--chat --system 'Be brief.'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Hello, world\nHello, world\n");
  EXPECT_EQ(r.err, "") << "no prompt on a pipe";
  EXPECT_EQ(server_.runtime().jobs_submitted(), 2);
}

TEST_F(DaemonClientsTest, GenPromptFromStdin) {
  const RunResult r = GenWithInput("a prompt\\non two lines", "-");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(server_.runtime().last_job().prompt, "a prompt\non two lines");
}

TEST_F(DaemonClientsTest, GenExitCodes) {
  RunResult r = Gen({});
  EXPECT_EQ(r.exit_code, 2) << "no prompt, no --chat";
  EXPECT_NE(r.err.find("--chat"), std::string::npos) << r.err;
  r = Gen({"x", "--temp", "-1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("temperature"), std::string::npos) << r.err;
  r = RunCommand({kOctoGen, "--socket", server_.socket_path() + ".none", "x"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "octo-gen: cannot reach octod at unix:" + server_.socket_path() + ".none: is it running?\n");
}

TEST_F(DaemonClientsTest, StatusShowsTheResidencyMap) {
  const RunResult r = Ctl("status");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("layer map   PRSP"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("backend cpu (fake)"), std::string::npos) << r.out;
}

TEST_F(DaemonClientsTest, StatusJsonIsTheReply) {
  const RunResult r = Ctl("status", {"--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["version"], "test");
  EXPECT_EQ(json["model"]["path"], "tiny");
  EXPECT_EQ(json["layers"].size(), 4u);
}

// Whether process `pid` has a handler for SIGINT (/proc/PID/status SigCgt).
bool CatchesSigint(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigCgt:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> (SIGINT - 1)) & 1;
  }
  return false;
}

TEST_F(DaemonClientsTest, StatusWatchRefreshesUntilInterrupted) {
  const pid_t pid = StartCommand({kOctoCtl, "status", "--socket", server_.socket_path(), "--watch", "0.1", "--json"});
  // SIGINT once octo-ctl catches it (its SigCgt mask says so): on a busy
  // machine a fixed sleep could land before the handler and kill it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!CatchesSigint(pid) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few refreshes
  ::kill(pid, SIGINT);
  EXPECT_EQ(WaitCommand(pid), 0);
}

TEST_F(DaemonClientsTest, ResidencySendsWhatWasGiven) {
  RunResult r = Ctl("residency", {"--pin-first", "2", "--budget", "3GiB"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("pinned first 2"), std::string::npos) << r.out;
  r = Ctl("residency", {"--budget", "auto"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::vector<ResidencyChange> changes = server_.runtime().residency_changes();
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].pin_first, std::optional<uint32_t>(2));
  EXPECT_EQ(changes[0].budget_bytes, std::optional<uint64_t>(3ull << 30));
  EXPECT_EQ(changes[0].auto_budget, std::optional<bool>(false));
  EXPECT_FALSE(changes[1].pin_first.has_value());
  EXPECT_EQ(changes[1].auto_budget, std::optional<bool>(true));
  r = Ctl("residency", {"--budget", "lots"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--budget 'lots'"), std::string::npos) << r.err;
}

TEST_F(DaemonClientsTest, ResidencySendsTheVramBudget) {
  RunResult r = Ctl("residency", {"--vram-budget", "60GiB"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Ctl("residency", {"--vram-budget", "auto", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::vector<ResidencyChange> changes = server_.runtime().residency_changes();
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].vram_budget_bytes, std::optional<uint64_t>(60ull << 30));
  EXPECT_EQ(changes[0].vram_auto, std::optional<bool>(false));
  EXPECT_FALSE(changes[0].budget_bytes.has_value()) << "the host budget is left alone";
  EXPECT_FALSE(changes[0].auto_budget.has_value());
  EXPECT_FALSE(changes[1].vram_budget_bytes.has_value());
  EXPECT_EQ(changes[1].vram_auto, std::optional<bool>(true));
  r = Ctl("residency", {"--vram-budget", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--vram-budget '0'"), std::string::npos) << r.err;
  EXPECT_EQ(server_.runtime().residency_changes().size(), 2u) << "a bad size is not sent";
}

TEST_F(DaemonClientsTest, ResidencySendsTheExpertCache) {
  RunResult r = Ctl("residency", {"--expert-cache", "8GiB"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Ctl("residency", {"--expert-cache", "auto"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Ctl("residency", {"--expert-cache", "0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::vector<ResidencyChange> changes = server_.runtime().residency_changes();
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].expert_cache_bytes, std::optional<uint64_t>(8ull << 30));
  EXPECT_FALSE(changes[0].budget_bytes.has_value()) << "the layer budget is left alone";
  EXPECT_FALSE(changes[0].auto_budget.has_value());
  EXPECT_EQ(changes[1].expert_cache_bytes, std::optional<uint64_t>(kAutoExpertCache));
  EXPECT_EQ(changes[2].expert_cache_bytes, std::optional<uint64_t>(0)) << "0: no cache";
  r = Ctl("residency", {"--expert-cache", "half"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--expert-cache 'half'"), std::string::npos) << r.err;
  EXPECT_EQ(server_.runtime().residency_changes().size(), 3u) << "a bad size is not sent";
}

TEST_F(DaemonClientsTest, LoadUnloadModelsHealth) {
  RunResult r = Ctl("models");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("* tiny"), std::string::npos) << r.out;
  r = Ctl("load", {"big"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("loaded big: qwen2, 80 layers"), std::string::npos) << r.out;
  r = Ctl("load", {"nowhere"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("nowhere"), std::string::npos) << r.err;
  EXPECT_EQ(StatusCodeNameIn(r.err), "") << r.err;
  r = Ctl("models", {"--json"});
  EXPECT_EQ(nlohmann::json::parse(r.out)["models"][1]["loaded"], true) << r.out;
  EXPECT_EQ(Ctl("unload").exit_code, 0);
  r = Ctl("health");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("serving; model none"), std::string::npos) << r.out;
  server_.runtime().Shutdown();
  EXPECT_EQ(Ctl("health").exit_code, 1) << "not serving while shutting down";
}

TEST_F(DaemonClientsTest, ChatCommandsAndQuotedBlocks) {
  const RunResult r = GenWithInput(
      "/set temperature 0.5\\nhi\\n\"\"\"two\\nlines\"\"\"\\n/clear\\nagain\\n/bye\\nnot sent\\n", "--chat");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(server_.runtime().jobs_submitted(), 3) << r.err;
  const GenerateJob last = server_.runtime().last_job();
  EXPECT_EQ(last.sampling.temperature, 0.5f);
  ASSERT_FALSE(last.messages.empty());
  EXPECT_EQ(last.messages.back().content, "again");
  EXPECT_NE(r.err.find("(the conversation is cleared)"), std::string::npos) << r.err;
}

// The command-line conventions every Octo program shares (client/command_line.h).
TEST_F(DaemonClientsTest, MisspelledFlagsAndCommandsGetTheClosestNames) {
  RunResult r = RunCommand({kOctoCtl, "stauts", "--socket", server_.socket_path()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command 'stauts'; did you mean 'status'?"), std::string::npos) << r.err;
  r = Gen({"--temprature", "0", "Hi"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown flag --temprature; did you mean --temperature?"), std::string::npos) << r.err;
  r = Ctl("residency", {"--budgte", "4GiB"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("did you mean --budget?"), std::string::npos) << r.err;
  r = RunCommand({kOctoCtl});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("give a command: decompose, verify"), std::string::npos) << r.err;
  EXPECT_EQ(server_.runtime().jobs_submitted(), 0);
}

TEST_F(DaemonClientsTest, EveryProgramPrintsItsVersion) {
  for (const std::string& program : {kOctoCtl, kOctoGen}) {
    const RunResult r = RunCommand({program, "--version"});
    EXPECT_EQ(r.exit_code, 0) << program << ": " << r.err;
    EXPECT_NE(r.out.find(" 0."), std::string::npos) << program << ": " << r.out;
  }
}

TEST_F(DaemonClientsTest, TheSocketComesFromAFlagBeforeOrAfterTheCommandOrTheEnvironment) {
  EXPECT_EQ(RunCommand({kOctoCtl, "--socket", server_.socket_path(), "health"}).exit_code, 0);
  EXPECT_EQ(RunCommand({kOctoCtl, "health", "--socket", server_.socket_path()}).exit_code, 0);
  const RunResult env = RunCommand({"/usr/bin/env", "OCTO_SOCKET=" + server_.socket_path(), kOctoCtl, "health"});
  EXPECT_EQ(env.exit_code, 0) << env.err;
  const RunResult gen = RunCommand({"/usr/bin/env", "OCTO_SOCKET=" + server_.socket_path(), kOctoGen, "Hi"});
  EXPECT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_EQ(gen.out, "Hello, world\n");
  const RunResult help = RunCommand({kOctoGen, "--help"});
  EXPECT_NE(help.out.find("OCTO_SOCKET"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace octo::testing
