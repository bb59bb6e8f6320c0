// octod under faults, everything real (daemon, loader, socket, shared
// memory, clients): the loader killed mid-generation, octod itself killed,
// a layer file corrupted on disk, malformed requests. What a user would
// notice: generations that survive or fail with the right code, a daemon
// that stays up, and nothing left behind -- no loader, no /dev/shm segment.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/server/endpoint.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "octo.grpc.pb.h"
#include "tests/daemon/server/octod_harness.h"

namespace octo::testing {
namespace {

constexpr char kPrompt[] = "Once upon a time";
// On the generated model this prompt runs greedy past 200 tokens without an
// end of text ("Once upon a time" ends at 55); the tests that need a long
// generation check that it still does.
constexpr char kLongPrompt[] = "The little dog";
constexpr int kLayers = 8;
// How long a killed octod's loader and ring may outlive it.
constexpr auto kCleanupTime = std::chrono::seconds(2);

class OctodFaultTest : public OctodTest {
 protected:
  void SetUp() override { MakeModel("m", kLayers); }

  // octod streaming every layer through one ring slot: the loader is busy
  // on every pass.
  void StartStreaming(std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = StreamEveryLayer("m");
    flags.insert(flags.end(), extra.begin(), extra.end());
    ASSERT_TRUE(octod_.Start(ServeArgs("m", flags)));
  }

  RunResult Greedy(int max_tokens, const std::string& prompt = kPrompt) const {
    return octod_.Gen({prompt, "--temp", "0", "-n", std::to_string(max_tokens), "--json"});
  }

  // Runs `during` once octo-gen has printed a few tokens of a greedy
  // generation from kLongPrompt; returns that generation. `tokens_at` gets
  // how many tokens the client had when `during` ran.
  RunResult DuringAGeneration(int max_tokens, const std::function<void()>& during, size_t* tokens_at) {
    std::unique_ptr<BackgroundRun> client = octod_.GenInBackground(
        {kLongPrompt, "--temp", "0", "-n", std::to_string(max_tokens), "--json"}, dir_.Path("gen"));
    const bool flowing = WaitFor(
        [&] {
          *tokens_at = TokenIds(client->Out()).size();
          return *tokens_at >= 10;
        },
        std::chrono::seconds(30));
    if (flowing) during();
    const RunResult generation = client->Wait();
    EXPECT_TRUE(flowing) << "no tokens came within 30 s: " << generation.err;
    return generation;
  }

  // kill -9 octod: within kCleanupTime its loader has gone and so has its
  // ring; the socket file stays, and a new octod on it starts and serves.
  void KillOctodAndCheckItLeftNothing(pid_t loader) {
    const pid_t octod = octod_.pid();
    octod_.Kill();
    EXPECT_TRUE(WaitFor([&] { return !ProcessRuns(loader); }, kCleanupTime)) << "octo-loader " << loader << " outlived octod";
    EXPECT_TRUE(WaitFor([&] { return RingSegmentsOf(octod).empty(); }, kCleanupTime))
        << "/dev/shm still holds " << RingSegmentsOf(octod).size() << " ring(s) of the killed octod";
    EXPECT_TRUE(std::filesystem::exists(octod_.socket())) << "a killed octod cannot remove its socket";

    StartStreaming();
    EXPECT_NE(octod_.Log().find("removed a stale socket"), std::string::npos) << octod_.Log();
    const RunResult r = Greedy(4);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(TokenIds(r.out).empty());
  }
};

// The loader dies (SIGKILL) while a generation streams layers through it:
// octod starts another, and the generation ends with the uninterrupted
// run's tokens.
TEST_F(OctodFaultTest, KilledLoaderIsRestartedAndTheGenerationKeepsItsTokens) {
  StartStreaming();
  const RunResult uninterrupted = Greedy(200, kLongPrompt);
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.err;
  const std::vector<int> expected = TokenIds(uninterrupted.out);
  ASSERT_EQ(expected.size(), 200u) << "a long generation is needed to kill the loader in its middle";
  const nlohmann::json before = octod_.Status();
  ASSERT_TRUE(before["loader"]["running"].get<bool>()) << before.dump();
  const pid_t loader = before["loader"]["pid"].get<int>();
  ASSERT_GT(loader, 0);

  size_t tokens_at_kill = 0;
  const RunResult interrupted = DuringAGeneration(200, [&] { ::kill(loader, SIGKILL); }, &tokens_at_kill);
  EXPECT_LT(tokens_at_kill, expected.size()) << "the kill came after the generation";
  ASSERT_EQ(interrupted.exit_code, 0) << interrupted.err;
  EXPECT_EQ(TokenIds(interrupted.out), expected);

  const nlohmann::json after = octod_.Status();
  EXPECT_GE(after["loader"]["restarts"].get<int>(), 1) << after.dump();
  EXPECT_TRUE(after["loader"]["running"].get<bool>()) << after.dump();
  EXPECT_NE(after["loader"]["pid"].get<int>(), loader) << after.dump();
  EXPECT_FALSE(ProcessRuns(loader)) << "octod reaped the dead loader";
}

// The loader hangs (SIGSTOP: a stalled disk) while a generation streams
// layers through it: after --loader-timeout octod kills it, starts another,
// and the generation ends with the uninterrupted run's tokens; status
// counts one restart, for a stall.
TEST_F(OctodFaultTest, StoppedLoaderIsReplacedAndTheGenerationKeepsItsTokens) {
  StartStreaming({"--loader-timeout", "1"});
  const RunResult uninterrupted = Greedy(200, kLongPrompt);
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.err;
  const std::vector<int> expected = TokenIds(uninterrupted.out);
  ASSERT_EQ(expected.size(), 200u);
  const pid_t loader = octod_.Status()["loader"]["pid"].get<int>();
  ASSERT_GT(loader, 0);

  size_t tokens_at_stop = 0;
  const RunResult interrupted = DuringAGeneration(200, [&] { ::kill(loader, SIGSTOP); }, &tokens_at_stop);
  EXPECT_LT(tokens_at_stop, expected.size()) << "the stop came after the generation";
  ASSERT_EQ(interrupted.exit_code, 0) << interrupted.err;
  EXPECT_EQ(TokenIds(interrupted.out), expected);

  const nlohmann::json after = octod_.Status();
  EXPECT_EQ(JsonU64(after["loader"]["restarts"]), 1u) << after.dump();
  EXPECT_EQ(JsonU64(after["loader"]["stalls"]), 1u) << after.dump();
  EXPECT_NE(after["loader"]["pid"].get<int>(), loader) << after.dump();
  EXPECT_FALSE(ProcessRuns(loader)) << "octod killed and reaped the stopped loader";
}

// SIGTERM while a pass waits on a hung loader (its stall timeout far off):
// octod still stops promptly, exit 0, nothing left behind, and the client
// hears that octod is shutting down.
TEST_F(OctodFaultTest, SigtermDuringAStallStopsPromptly) {
  StartStreaming({"--loader-timeout", "600"});
  const pid_t loader = octod_.Status()["loader"]["pid"].get<int>();
  ASSERT_GT(loader, 0);
  ASSERT_EQ(::kill(loader, SIGSTOP), 0);
  std::unique_ptr<BackgroundRun> client =
      octod_.GenInBackground({kLongPrompt, "--temp", "0", "-n", "50", "--json"}, dir_.Path("gen"));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_EQ(JsonU64(octod_.Status()["passes"]), 0u) << "the generation waits on the loader: " << octod_.Status().dump();
  ASSERT_TRUE(TokenIds(client->Out()).empty());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(octod_.Stop());  // SIGTERM: exit 0, socket and ring removed
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << octod_.Log();
  EXPECT_FALSE(ProcessRuns(loader));
  const RunResult generation = client->Wait();
  EXPECT_NE(generation.exit_code, 0);
  EXPECT_NE(generation.err.find("shutting down"), std::string::npos) << generation.err;
}

TEST_F(OctodFaultTest, KilledIdleOctodLeavesNoLoaderAndNoRing) {
  StartStreaming();
  const nlohmann::json status = octod_.Status();
  const pid_t loader = status["loader"]["pid"].get<int>();
  ASSERT_TRUE(ProcessRuns(loader)) << status.dump();
  ASSERT_FALSE(RingSegmentsOf(octod_.pid()).empty()) << "a streaming octod holds a ring";
  KillOctodAndCheckItLeftNothing(loader);
}

TEST_F(OctodFaultTest, OctodKilledMidGenerationLeavesNoLoaderAndNoRing) {
  StartStreaming();
  const pid_t loader = octod_.Status()["loader"]["pid"].get<int>();
  ASSERT_TRUE(ProcessRuns(loader));
  size_t tokens_at_kill = 0;
  const RunResult cut = DuringAGeneration(200, [&] { KillOctodAndCheckItLeftNothing(loader); }, &tokens_at_kill);
  EXPECT_EQ(cut.exit_code, 1) << "the client saw its daemon die: " << cut.err;
  EXPECT_NE(cut.err.find("octod at "), std::string::npos) << cut.err;
  EXPECT_EQ(StatusCodeNameIn(cut.err), "") << cut.err;
}

// A streamed layer file with one byte flipped after octod loaded the model:
// that generation fails with DATA_LOSS naming the file, octod stays up,
// counts the failure, and serves again once the file is whole.
TEST_F(OctodFaultTest, CorruptedLayerFileIsDataLossAndOctodStaysUp) {
  StartStreaming();
  const RunResult good = Greedy(8);
  ASSERT_EQ(good.exit_code, 0) << good.err;

  const std::string file = ModelDir("m") + "/layer_003.bin";
  auto flip = [&] { FlipMiddleByte(file); };
  flip();
  const RunResult bad = Greedy(8);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("layer_003.bin: checksum mismatch"), std::string::npos) << bad.err;
  EXPECT_EQ(StatusCodeNameIn(bad.err), "") << bad.err;

  const RunResult health = octod_.Ctl("health");
  EXPECT_EQ(health.exit_code, 0) << health.err;
  const nlohmann::json status = octod_.Status();
  EXPECT_GE(status["loader"]["checksum_failures"].get<int>(), 1) << status.dump();

  flip();  // whole again
  const RunResult again = Greedy(8);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(TokenIds(again.out), TokenIds(good.out));
}

// One Generate call straight through the generated stub, for requests
// octo-gen refuses to send; returns the call's status.
grpc::Status CallGenerate(const std::string& socket, const v1::GenerateRequest& request) {
  std::unique_ptr<v1::Octo::Stub> stub =
      v1::Octo::NewStub(grpc::CreateChannel(UnixTarget(socket), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader = stub->Generate(&context, request);
  for (v1::GenerateResponse message; reader->Read(&message);) {
  }
  return reader->Finish();
}

// Each bad request is refused with the code the API promises, and octod
// serves the next one.
// A layer file cut short while octod runs (a disk filling, a copy that did
// not finish): the generation that needs it fails DATA_LOSS naming the
// file, octod stays up, and once the file is whole again it serves again.
TEST_F(OctodFaultTest, TruncatedLayerFileIsDataLossAndOctodStaysUp) {
  StartStreaming();
  const RunResult good = Greedy(8);
  ASSERT_EQ(good.exit_code, 0) << good.err;
  const std::string file = ModelDir("m") + "/layer_002.bin";
  const uintmax_t size = std::filesystem::file_size(file);
  const std::string saved = dir_.Path("layer_002.saved");
  std::filesystem::copy_file(file, saved);
  for (const uintmax_t cut : {size / 2, uintmax_t{100}}) {
    SCOPED_TRACE(cut);
    std::filesystem::resize_file(file, cut);
    const RunResult bad = Greedy(8);
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("layer_002.bin"), std::string::npos) << bad.err;
    EXPECT_EQ(StatusCodeNameIn(bad.err), "") << bad.err;
    EXPECT_EQ(octod_.Ctl("health").exit_code, 0) << "octod stays up";
    std::filesystem::copy_file(saved, file, std::filesystem::copy_options::overwrite_existing);
  }
  const RunResult again = Greedy(8);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(TokenIds(again.out), TokenIds(good.out));
}

TEST_F(OctodFaultTest, MalformedRequestsAreRefusedAndOctodStaysUp) {
  ASSERT_TRUE(octod_.Start(ServeArgs("m")));
  // Refused with a message naming `what`, in words (no status code name).
  auto expect_refused = [&](const RunResult& r, const std::string& what) {
    EXPECT_EQ(r.exit_code, 1) << what;
    EXPECT_EQ(StatusCodeNameIn(r.err), "") << what << ": " << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << what << ": " << r.err;
    EXPECT_EQ(octod_.Ctl("health").exit_code, 0) << "octod went down after " << what;
  };
  expect_refused(octod_.Gen({kPrompt, "--temp", "-1", "-n", "2"}), "temperature");
  expect_refused(octod_.Gen({kPrompt, "--top-p", "2", "-n", "2"}), "top_p");
  // A session id octod never made (a name would be opened: octo-gen --session NAME).
  const std::string unknown_id = "s0123456789abcdef0123456789abcdef";
  expect_refused(octod_.Gen({kPrompt, "--session", unknown_id, "-n", "2"}), unknown_id);
  expect_refused(octod_.Gen({kPrompt, "--session", "not a name", "-n", "2"}), "session name");
  // A prompt one byte over the 1 MiB limit, through stdin.
  const std::string big = dir_.Path("big.txt");
  std::ofstream(big) << std::string((1 << 20) + 1, 'a');
  expect_refused(RunCommand({"/bin/sh", "-c",
                             "exec '" + OctoGenPath() + "' --socket '" + octod_.socket() + "' -n 2 - < '" + big + "'"}),
                 "1048576");

  // What octo-gen will not send.
  v1::GenerateRequest empty;
  EXPECT_EQ(CallGenerate(octod_.socket(), empty).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "empty prompt";
  v1::GenerateRequest both;
  both.set_prompt(kPrompt);
  both.add_prompt_tokens(1);
  EXPECT_EQ(CallGenerate(octod_.socket(), both).error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << "prompt and prompt_tokens";
  v1::GenerateRequest outside;
  outside.add_prompt_tokens(1 << 30);
  EXPECT_EQ(CallGenerate(octod_.socket(), outside).error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << "a token outside the vocabulary";
  v1::GenerateRequest long_session;
  long_session.set_prompt(kPrompt);
  long_session.set_session_id(std::string(65, 's'));
  EXPECT_EQ(CallGenerate(octod_.socket(), long_session).error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << "a 65-byte session id";
  v1::GenerateRequest many_logprobs;
  many_logprobs.set_prompt(kPrompt);
  many_logprobs.mutable_sampling()->set_top_logprobs(21);
  EXPECT_EQ(CallGenerate(octod_.socket(), many_logprobs).error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << "21 top_logprobs";

  EXPECT_EQ(octod_.Ctl("health").exit_code, 0);
  const RunResult ok = Greedy(4);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(TokenIds(ok.out).size(), 4u);
}

}  // namespace
}  // namespace octo::testing
