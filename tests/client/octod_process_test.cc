// octod as a user runs it: a real daemon process on a generated model,
// driven by the real octo-gen and octo-ctl, checked on what they print, how
// they exit, and what octod leaves behind.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "daemon/server/endpoint.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "storage/byte_size.h"
#include "tests/client/subprocess.h"
#include "tests/daemon/server/octod_harness.h"
#include "tests/storage/test_models.h"
#include "tests/temp_dir.h"

namespace octo::testing {
namespace {

const std::string& kOctoGen = OctoGenPath();
const std::string& kOctoCtl = OctoCtlPath();
constexpr int kLayers = 6;

// A free localhost TCP port (free when asked; good enough for a test).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t size = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

class OctodProcessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models_ = new TempDir();
    GenerateModel(models_->Path("m.gguf"), "tiny", "Q4_K_M", [](ModelShape& shape) { shape.n_layers = kLayers; });
    std::filesystem::create_directories(models_->Path("root"));
    ASSERT_TRUE(Decompose(models_->Path("m.gguf"), models_->Path("root/m")));
  }
  static void TearDownTestSuite() { delete models_; }

  std::string socket() const { return octod_.socket(); }

  std::vector<std::string> ServeArgs(std::vector<std::string> extra) const {
    std::vector<std::string> args = {"--models-root", models_->Path("root"), "--model", "m"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  // The whole command line, for an octod run to its end.
  std::vector<std::string> OctodCommand(std::vector<std::string> extra) const {
    std::vector<std::string> command = {OctodPath(), "--socket", socket(), "--threads", "2"};
    const std::vector<std::string> args = ServeArgs(std::move(extra));
    command.insert(command.end(), args.begin(), args.end());
    return command;
  }

  // Starts octod and waits until it answers on its socket.
  void StartOctod(std::vector<std::string> extra = {}) { ASSERT_TRUE(octod_.Start(ServeArgs(std::move(extra)))); }

  // SIGTERM: octod must exit 0 and remove its socket (and its ring).
  void StopOctod() { EXPECT_TRUE(octod_.Stop()); }

  void TearDown() override {
    if (octod_.pid() > 0) StopOctod();
  }

  RunResult Gen(std::vector<std::string> args) { return octod_.Gen(std::move(args)); }

  // octod's 12 greedy tokens are octo-ctl run's in this process (with
  // `run_flags`, which should match how octod was started).
  void ExpectServedTokensAreLocalOnes(const std::vector<std::string>& run_flags) {
    std::vector<std::string> argv = {kOctoCtl, "run", models_->Path("root/m"), "Once upon a time", "--temp", "0",
                                     "-n", "12", "--json"};
    argv.insert(argv.end(), run_flags.begin(), run_flags.end());
    const RunResult local = RunCommand(argv);
    ASSERT_EQ(local.exit_code, 0) << local.err;
    const nlohmann::json local_json = nlohmann::json::parse(local.out);
    std::vector<int> expected;
    for (const auto& token : local_json["tokens"]) expected.push_back(token["id"].get<int>());
    ASSERT_EQ(expected.size(), 12u) << local.out;
    const RunResult served = Gen({"Once upon a time", "--temp", "0", "-n", "12", "--json"});
    ASSERT_EQ(served.exit_code, 0) << served.err;
    EXPECT_EQ(TokenIds(served.out), expected);
  }

  static TempDir* models_;
  TempDir dir_;
  // The socket in a directory octod must create.
  OctodProcess octod_{dir_.Path("run/octod.sock"), dir_.Path("octod.log")};
};

TempDir* OctodProcessTest::models_ = nullptr;

TEST_F(OctodProcessTest, GreedyTokensMatchTheInProcessEngine) {
  StartOctod();
  ExpectServedTokensAreLocalOnes({});
}

// --cache-type-k/-v: octod serves octo-ctl run's tokens at the same cache
// types; octo-ctl status names the types, the bytes of a position and the
// positions the budget holds; octo-ctl load sets them per model and names a
// bad one.
TEST_F(OctodProcessTest, CacheTypesAreServedShownAndSetPerModel) {
  StartOctod({"--cache-type-k", "q8_0", "--cache-type-v", "q4_0", "--kv-budget", "1MiB"});
  ExpectServedTokensAreLocalOnes({"--cache-type-k", "q8_0", "--cache-type-v", "q4_0"});

  // tiny's rows: 4 kv heads of 32 values; a layer's position is a Q8_0 key
  // row (4 blocks of 34 bytes) and a Q4_0 value row (4 of 18): 208 bytes.
  RunResult status = RunCommand({kOctoCtl, "status", "--socket", socket()});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("k q8_0, v q4_0, " + FormatByteSize(kLayers * 208) + " per position: the budget holds " +
                            std::to_string((1 << 20) / (kLayers * 208)) + " positions"),
            std::string::npos)
      << status.out;
  RunResult load = RunCommand({kOctoCtl, "load", "m", "--cache-type-k", "f16", "--socket", socket()});
  ASSERT_EQ(load.exit_code, 0) << load.err;
  status = RunCommand({kOctoCtl, "status", "--json", "--socket", socket()});
  const nlohmann::json model = nlohmann::json::parse(status.out)["models"][0];
  EXPECT_EQ(model["kv_cache_type_k"], "f16") << status.out;
  EXPECT_EQ(model["kv_cache_type_v"], "q4_0") << "the daemon's, not named at load: " << status.out;
  load = RunCommand({kOctoCtl, "load", "m", "--cache-type-v", "q3_k", "--socket", socket()});
  EXPECT_EQ(load.exit_code, 1);
  EXPECT_NE(load.err.find("cache_type_v: 'q3_k' is not a KV cache type (f16, q8_0, q4_0, q4_1)"), std::string::npos)
      << load.err;
}

// octo-ctl residency streams every layer at run time; the tokens stay the same.
TEST_F(OctodProcessTest, ResidencyChangedAtRunTimeKeepsTheTokens) {
  StartOctod();
  const RunResult resident = Gen({"Once upon a time", "--temp", "0", "-n", "10", "--json"});
  ASSERT_EQ(resident.exit_code, 0) << resident.err;

  RunResult r = RunCommand({kOctoCtl, "status", "--socket", socket(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json status = nlohmann::json::parse(r.out);
  ASSERT_EQ(status["layers"].size(), static_cast<size_t>(kLayers));
  uint64_t layer_bytes = 0;
  for (const auto& layer : status["layers"]) layer_bytes = std::max<uint64_t>(layer_bytes, std::stoull(layer["bytes"].get<std::string>()));
  // Two ring slots and nothing pinned: every layer streams.
  r = RunCommand({kOctoCtl, "residency", "--socket", socket(), "--pin-first", "0", "--pin-last", "0", "--budget",
                  std::to_string(2 * layer_bytes)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("0 resident, 6 streamed"), std::string::npos) << r.out;

  const RunResult streamed = Gen({"Once upon a time", "--temp", "0", "-n", "10", "--json"});
  ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
  EXPECT_EQ(TokenIds(streamed.out), TokenIds(resident.out));
  r = RunCommand({kOctoCtl, "status", "--socket", socket()});
  EXPECT_NE(r.out.find("layer map   SSSSSS"), std::string::npos) << r.out;
}

TEST_F(OctodProcessTest, ConversationReusesItsSessionCache) {
  StartOctod();
  const RunResult r = RunCommand({"/bin/sh", "-c",
                                  "printf 'Hello\\nAnd then?\\n' | '" + kOctoGen + "' --socket '" + socket() +
                                      "' --chat --chat-template chatml --temp 0 -n 4 --json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<nlohmann::json> done;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json event = nlohmann::json::parse(line);
    if (event["event"] == "done") done.push_back(event);
  }
  ASSERT_EQ(done.size(), 2u) << r.out;
  EXPECT_EQ(done[0]["stats"]["cached_tokens"], 0);
  EXPECT_GT(done[1]["stats"]["cached_tokens"].get<int>(), 0) << "the second turn continues the first's cache";
  const RunResult status = RunCommand({kOctoCtl, "status", "--socket", socket(), "--json"});
  EXPECT_EQ(nlohmann::json::parse(status.out)["sessions"].size(), 0u) << "octo-gen closed its session";
}

// SIGTERM mid-generation: the client gets what was generated and a clear
// error, octod exits 0 and removes its socket.
TEST_F(OctodProcessTest, SigtermDuringAGenerationStopsCleanly) {
  StartOctod();
  RunResult gen;
  // Greedy on this model never picks the end token: it runs until the context is
  // full (seconds). A seeded draw at temperature 1 picked it after ~150 tokens,
  // and then the generation could end before the SIGTERM came.
  std::thread client([&] { gen = Gen({"Once upon a time", "-n", "-1", "--temp", "0"}); });
  // Stop once tokens are flowing (octo-gen may take a while to start on a busy machine).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    const RunResult status = RunCommand({kOctoCtl, "status", "--socket", socket(), "--json"});
    const nlohmann::json json = nlohmann::json::parse(status.out, nullptr, false);
    if (json.is_object() && json["generated_tokens"] != "0") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  StopOctod();
  client.join();
  EXPECT_EQ(gen.exit_code, 1) << gen.out;
  EXPECT_NE(gen.err.find("shutting down"), std::string::npos) << gen.err;
  EXPECT_FALSE(gen.out.empty()) << "the text so far was printed";
}

TEST_F(OctodProcessTest, ASecondDaemonOnTheSameSocketIsRefused) {
  StartOctod();
  const RunResult second = RunCommand(OctodCommand({}));
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("already running"), std::string::npos) << second.err;
  EXPECT_TRUE(UnixSocketAnswers(socket())) << "the first one still serves";
}

TEST_F(OctodProcessTest, AStaleSocketIsReplacedAndTheSocketIsOwnerOnly) {
  std::filesystem::create_directories(dir_.Path("run"));
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket().c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ::close(fd);  // a socket file nobody answers on, as after a crash
  StartOctod();
  struct stat info = {};
  ASSERT_EQ(::stat(socket().c_str(), &info), 0);
  // No access for group or others. (The file is made under umask 077, so
  // 0700, and chmod'ed to 0600 just after the server starts: the socket may
  // answer in between, so either mode may be seen here.)
  EXPECT_EQ(info.st_mode & 077, 0u) << std::oct << (info.st_mode & 0777);
  EXPECT_EQ(Gen({"Hi", "-n", "2"}).exit_code, 0);
}

TEST_F(OctodProcessTest, TcpNeedsTheToken) {
  const RunResult refused = RunCommand(OctodCommand({"--listen", "127.0.0.1:7070"}));
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("token-file: required with listen"), std::string::npos) << refused.err;

  const std::string token_file = dir_.Path("token");
  std::ofstream(token_file) << "process-test-token-0123456789\n";
  ::chmod(token_file.c_str(), 0600);
  const std::string host = "127.0.0.1:" + std::to_string(FreePort());
  StartOctod({"--listen", host, "--token-file", token_file});
  RunResult r = RunCommand({kOctoCtl, "health", "--host", host, "--token-file", token_file});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("serving; model loaded"), std::string::npos) << r.out;

  const std::string wrong_file = dir_.Path("wrong");
  std::ofstream(wrong_file) << "not-the-token-000000000000\n";
  r = RunCommand({kOctoCtl, "health", "--host", host, "--token-file", wrong_file});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "octo-ctl: wrong token; give octod's token with --token-file FILE or OCTO_TOKEN_FILE\n");
  r = RunCommand({kOctoGen, "--host", host, "--token-file", token_file, "Hi", "-n", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace octo::testing
