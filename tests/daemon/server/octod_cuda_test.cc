// octod on the CUDA backend as real processes (through the host executor in
// an OCTO_CUDA_SIM build, with its copy delay on; on the GPU in an nvcc
// build, skipped without one): octo-gen's tokens, the VRAM budget, the
// tiers in status, concurrent clients, drafts (speculative decoding), the
// loader killed mid-generation, residency changed mid-generation, a device
// too small, bad flags.
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/core/runtime.h"
#include "daemon/engine/backend_setup.h"
#include "gtest/gtest.h"
#include "tests/client/subprocess.h"
#include "tests/daemon/server/octod_harness.h"

namespace octo::testing {
namespace {

constexpr int kLayers = 8;
constexpr char kPrompt[] = "Once upon a time";
constexpr char kLongPrompt[] = "The little dog";

class OctodCudaTest : public OctodTest {
 protected:
  void SetUp() override {
    if (UsableCudaDevices() == 0) GTEST_SKIP() << "no CUDA device";
    MakeModel("m", kLayers);
    largest_ = LargestLayerFile(ModelDir("m"));
  }

  // octod on CUDA with `vram_layers` layers' worth of VRAM beside the
  // default three staging buffers (0: every layer through staging but the pinned none);
  // the host tier holds what `host` says ("" = auto).
  std::vector<std::string> CudaArgs(int vram_layers, std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {"--backend", "cuda", "--pin-first", "0", "--pin-last", "0"};
    if (vram_layers >= 0) {
      args.insert(args.end(), {"--vram-budget", std::to_string((vram_layers + 3) * largest_)});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return ServeArgs("m", args);
  }

  RunResult Greedy(int n, const std::string& prompt = kPrompt) const {
    return octod_.Gen({prompt, "--temp", "0", "-n", std::to_string(n), "--json"});
  }

  std::vector<int> Tokens(int n, const std::string& prompt = kPrompt) const {
    const RunResult r = Greedy(n, prompt);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return TokenIds(r.out);
  }

  uint64_t largest_ = 0;
};

// Every layer in VRAM, or one there and the rest through three staging
// buffers from the host tier, or from disk through the ring: the same
// tokens; and status shows the device, the tiers and the copies.
TEST_F(OctodCudaTest, StreamedTiersGiveTheResidentTokensAndStatusShowsThem) {
  ASSERT_TRUE(octod_.Start(ServeArgs("m", {"--backend", "cuda"})));
  nlohmann::json status = octod_.Status();
  EXPECT_NE(status["backend"].get<std::string>().find("cuda"), std::string::npos) << status.dump();
  EXPECT_EQ(JsonU64(status["residency"]["device"]["device_layers"]), static_cast<uint64_t>(kLayers));
  const std::vector<int> resident = Tokens(24);
  ASSERT_EQ(resident.size(), 24u);
  ASSERT_TRUE(octod_.Stop());

  for (const bool from_disk : {false, true}) {
    SCOPED_TRACE(from_disk ? "disk tier" : "host tier");
    std::vector<std::string> extra;
    if (from_disk) extra = {"--layer-budget", std::to_string(largest_)};  // one ring slot, nothing held
    ASSERT_TRUE(octod_.Start(CudaArgs(1, extra)));
    EXPECT_EQ(Tokens(24), resident);
    status = octod_.Status();
    const nlohmann::json& device = status["residency"]["device"];
    ASSERT_TRUE(device["present"].get<bool>()) << status.dump();
    EXPECT_EQ(JsonU64(device["device_layers"]), 1u) << device.dump();
    EXPECT_EQ(JsonU64(device["staging_buffers"]), 3u) << device.dump();
    EXPECT_LE(JsonU64(device["peak_bytes"]), JsonU64(device["budget_bytes"])) << device.dump();
    EXPECT_GT(JsonU64(device["copied_bytes"]), 0u) << device.dump();
    EXPECT_GT(device["h2d_gbps"].get<double>(), 0.0) << device.dump();
    int vram = 0, host = 0, disk = 0;
    for (const nlohmann::json& layer : status["layers"]) {
      const std::string tier = layer["tier"].get<std::string>();
      vram += tier == "vram";
      host += tier == "host";
      disk += tier == "disk";
      if (tier != "vram") {
        EXPECT_GT(JsonU64(layer["copies"]), 0u) << layer.dump();
      }
    }
    EXPECT_EQ(vram, 1);
    EXPECT_EQ(from_disk ? disk : host, kLayers - 1) << status.dump();
    ASSERT_TRUE(octod_.Stop());
  }
}

// A MoE model whose layers stream from disk in two phases: the dense part
// is copied to the device ahead, the routed experts after the router (from
// the ring slot, which is held until then). The tokens are those of the
// model all in VRAM, and status counts the experts read.
// Each token's id, its logprob and its top 5 (the logits' bits, as far as
// a user sees them).
std::vector<double> TokenLogprobs(const std::string& json_lines) {
  std::vector<double> out;
  std::istringstream lines(json_lines);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
    if (!event.is_object() || event.value("event", "") != "token") continue;
    out.push_back(event["id"].get<int>());
    out.push_back(event["logprob"].get<double>());
    for (const nlohmann::json& top : event["top"]) out.push_back(top["logprob"].get<double>());
  }
  return out;
}

TEST_F(OctodCudaTest, SelectiveExpertsOnTheDeviceGiveTheResidentTokens) {
  MakeMoeModel("moe", "tiny-qwen3moe", 6, 16);
  const uint64_t largest = LargestLayerFile(ModelDir("moe"));
  auto logprobs = [&] {
    const RunResult r = octod_.Gen({kPrompt, "--temp", "0", "-n", "16", "--json", "--logprobs", "5"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return TokenLogprobs(r.out);
  };
  ASSERT_TRUE(octod_.Start(ServeArgs("moe", {"--backend", "cuda"})));
  const std::vector<double> resident = logprobs();
  ASSERT_EQ(resident.size(), 16u * 7);
  ASSERT_TRUE(octod_.Stop());

  // One layer in VRAM beside three staging buffers, the rest from disk
  // through two ring slots, no expert cache.
  ASSERT_TRUE(octod_.Start(ServeArgs("moe", {"--backend", "cuda", "--pin-first", "0", "--pin-last", "0",
                                             "--vram-budget", std::to_string(4 * largest), "--layer-budget",
                                             std::to_string(2 * largest), "--expert-cache", "0"})));
  EXPECT_EQ(logprobs(), resident);
  const nlohmann::json status = octod_.Status();
  const nlohmann::json& experts = status["residency"]["experts"];
  ASSERT_TRUE(experts["present"].get<bool>()) << status.dump();
  EXPECT_EQ(JsonU64(experts["two_phase_layers"]), 5u) << experts.dump();
  EXPECT_GT(JsonU64(experts["routed_from_disk"]), 0u) << experts.dump();
  EXPECT_GT(JsonU64(experts["expert_bytes_read"]), 0u) << experts.dump();
  // A decode step copies a few of 16 experts: far fewer bytes than whole layers.
  const uint64_t passes = JsonU64(status["passes"]);
  EXPECT_LT(JsonU64(status["residency"]["device"]["copied_bytes"]), passes * 5 * largest / 2) << status.dump();
  ASSERT_TRUE(octod_.Stop());
}

// Eight octo-gen processes at once, streamed: each gets its solo tokens.
TEST_F(OctodCudaTest, EightConcurrentClientsGetTheirSoloTokens) {
  ASSERT_TRUE(octod_.Start(CudaArgs(1)));
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "In a small town", "She opened",
                                            "One day", "The sun was hot", "Tom and Sam", "A big red ball"};
  constexpr int kTokens = 12;
  std::vector<std::vector<int>> alone;
  for (const std::string& p : prompts) alone.push_back(Tokens(kTokens, p));
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

// Speculative decoding on the device: the model drafting for itself (a
// second instance, on CUDA too), linear and as a tree, verified by the
// streamed model under its tree mask with the kept path compacted in the
// device's KV cache, and two clients at once: the tokens without a draft,
// in fewer passes.
TEST_F(OctodCudaTest, DraftsOnTheDeviceGiveThePlainTokens) {
  constexpr int kTokens = 20;
  for (const char* tree : {"0", "8"}) {
    SCOPED_TRACE(std::string("draft tree ") + tree);
    ASSERT_TRUE(octod_.Start(CudaArgs(1, {"--draft-model", "m", "--draft-tree", tree, "--draft-max", "4"})));
    std::vector<std::vector<int>> plain;
    for (const char* prompt : {kPrompt, kLongPrompt}) {
      const RunResult r = octod_.Gen({prompt, "--temp", "0", "-n", std::to_string(kTokens), "--json", "--draft-model",
                                      "none"});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      plain.push_back(TokenIds(r.out));
    }
    const std::vector<RunResult> drafted = octod_.GenConcurrently(
        {{kPrompt, "--temp", "0", "-n", std::to_string(kTokens), "--json"},
         {kLongPrompt, "--temp", "0", "-n", std::to_string(kTokens), "--json"}});
    for (size_t i = 0; i < drafted.size(); ++i) {
      ASSERT_EQ(drafted[i].exit_code, 0) << drafted[i].err;
      EXPECT_EQ(TokenIds(drafted[i].out), plain[i]);
      const nlohmann::json stats = DoneEvent(drafted[i].out)["stats"];
      EXPECT_EQ(stats["draft_model"], "m");
      EXPECT_LT(stats["target_passes"].get<int>() * 2, kTokens) << stats.dump();
    }
    ASSERT_TRUE(octod_.Stop());
  }
}

// Runs `during` once a long greedy generation has printed 8 tokens.
RunResult DuringAGeneration(const OctodProcess& octod, const std::string& prefix, int n,
                            const std::function<void()>& during) {
  std::unique_ptr<BackgroundRun> client =
      octod.GenInBackground({kLongPrompt, "--temp", "0", "-n", std::to_string(n), "--json"}, prefix);
  const bool flowing = WaitFor([&] { return TokenIds(client->Out()).size() >= 8; }, std::chrono::seconds(60));
  EXPECT_TRUE(flowing) << "no tokens within 60 s";
  if (flowing) during();
  return client->Wait();
}

// kill -9 of the loader while layers stream from disk: the same tokens.
TEST_F(OctodCudaTest, KilledLoaderMidGenerationKeepsTheTokens) {
  ASSERT_TRUE(octod_.Start(CudaArgs(1, {"--layer-budget", std::to_string(largest_)})));
  const std::vector<int> expected = Tokens(48, kLongPrompt);
  ASSERT_EQ(expected.size(), 48u);
  const pid_t loader = octod_.Status()["loader"]["pid"].get<int>();
  ASSERT_GT(loader, 0);
  const RunResult r = DuringAGeneration(octod_, dir_.Path("gen"), 48, [&] { ::kill(loader, SIGKILL); });
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(TokenIds(r.out), expected);
  EXPECT_GE(octod_.Status()["loader"]["restarts"].get<int>(), 1);
}

// octo-ctl residency moves layers between VRAM and staging mid-generation:
// the generation keeps its tokens, and the new plan is in force.
TEST_F(OctodCudaTest, ResidencyChangedMidGenerationKeepsTheTokens) {
  ASSERT_TRUE(octod_.Start(CudaArgs(1)));
  const std::vector<int> expected = Tokens(48, kLongPrompt);
  const std::string wider = std::to_string(6 * largest_);  // three layers in VRAM beside three staging buffers
  const RunResult r = DuringAGeneration(octod_, dir_.Path("gen"), 48, [&] {
    const RunResult ctl = octod_.Ctl("residency", {"--vram-budget", wider});
    EXPECT_EQ(ctl.exit_code, 0) << ctl.err;
  });
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(TokenIds(r.out), expected);
  EXPECT_EQ(JsonU64(octod_.Status()["residency"]["device"]["device_layers"]), 3u);
}

// A small device (the executor's size, or the auto budget on a GPU): the
// auto VRAM budget fits beside the KV budget and the reserve, and its peak
// never exceeds it.
TEST_F(OctodCudaTest, SmallDeviceAutoBudgetIsNeverExceeded) {
  const uint64_t device = 1024ull << 20;  // 1 GiB: 512 MiB reserve + 256 MiB KV + a few layers
  ::setenv("OCTO_SIM_DEVICE_MEMORY", std::to_string(device).c_str(), 1);
  const bool started = octod_.Start(ServeArgs("m", {"--backend", "cuda", "--kv-budget", "256MiB"}));
  ::unsetenv("OCTO_SIM_DEVICE_MEMORY");
  ASSERT_TRUE(started);
  ASSERT_EQ(Tokens(16).size(), 16u);
  const nlohmann::json d = octod_.Status()["residency"]["device"];
  EXPECT_TRUE(d["auto_budget"].get<bool>()) << d.dump();
  EXPECT_GT(JsonU64(d["budget_bytes"]), 0u) << d.dump();
  EXPECT_LE(JsonU64(d["peak_bytes"]), JsonU64(d["budget_bytes"])) << d.dump();
  // The auto budget leaves the reserve free, on the executor's small device
  // and on a GPU alike.
  EXPECT_GE(JsonU64(d["free_bytes"]), kVramReserveBytes) << d.dump();
#ifdef OCTO_CUDA_SIM
  // The executor's device is the configured size; a GPU is the size it is.
  EXPECT_LE(JsonU64(d["total_bytes"]) - JsonU64(d["free_bytes"]), device) << d.dump();
#endif
}

// Decode steps replay as CUDA graphs by default: the tokens of
// --no-cuda-graphs, and status (JSON and octo-ctl) counts the captures and
// replays.
TEST_F(OctodCudaTest, DecodeStepsReplayAsCudaGraphsAndStatusCountsThem) {
  ASSERT_TRUE(octod_.Start(CudaArgs(-1, {"--no-cuda-graphs"})));
  const std::vector<int> eager = Tokens(16);
  EXPECT_EQ(JsonU64(octod_.Status()["residency"]["device"]["graph_replays"]), 0u);
  ASSERT_TRUE(octod_.Stop());

  ASSERT_TRUE(octod_.Start(CudaArgs(-1)));
  EXPECT_EQ(Tokens(16), eager);
  const nlohmann::json d = octod_.Status()["residency"]["device"];
  EXPECT_GE(JsonU64(d["graph_captures"]), 1u) << d.dump();
  EXPECT_GE(JsonU64(d["graph_replays"]), 10u) << d.dump();
  const RunResult status = octod_.Ctl("status", {});
  EXPECT_NE(status.out.find("replayed as a CUDA graph"), std::string::npos) << status.out;
}

#ifdef OCTO_CUDA_SIM
// A host that cannot pin octod's host tier (a memlock limit; the executor's
// OCTO_SIM_PINNABLE_MEMORY plays it): the resident tokens through pageable
// copies, and status and the log say so instead of falling back silently.
TEST_F(OctodCudaTest, UnpinnableHostMemoryIsNamedNotSilent) {
  ASSERT_TRUE(octod_.Start(CudaArgs(-1)));
  const std::vector<int> resident = Tokens(16);
  EXPECT_EQ(JsonU64(octod_.Status()["residency"]["device"]["unpinned_bytes"]), 0u);
  ASSERT_TRUE(octod_.Stop());

  ::setenv("OCTO_SIM_PINNABLE_MEMORY", "4096", 1);
  const bool started = octod_.Start(CudaArgs(1));
  ::unsetenv("OCTO_SIM_PINNABLE_MEMORY");
  ASSERT_TRUE(started);
  EXPECT_EQ(Tokens(16), resident);
  const nlohmann::json d = octod_.Status()["residency"]["device"];
  EXPECT_GT(JsonU64(d["unpinned_bytes"]), 0u) << d.dump();
  EXPECT_NE(d.value("pin_error", "").find("cudaErrorMemoryAllocation"), std::string::npos) << d.dump();
  EXPECT_NE(octod_.Log().find("could not be pinned"), std::string::npos) << octod_.Log();
  const RunResult status = octod_.Ctl("status", {});
  EXPECT_NE(status.out.find("not pinned"), std::string::npos) << status.out;
}
#endif

// A device too small for the pinned layers: RESOURCE_EXHAUSTED naming sizes
// at load; octod itself refuses to start with that model.
TEST_F(OctodCudaTest, TooSmallVramBudgetIsRefusedWithTheSizes) {
  ASSERT_TRUE(octod_.Start(ServeArgs("", {"--backend", "cuda", "--vram-budget", std::to_string(largest_ / 2)})));
  const RunResult load = octod_.Ctl("load", {"m"});
  EXPECT_NE(load.exit_code, 0);
  EXPECT_NE(load.err.find("VRAM"), std::string::npos) << load.err;
  EXPECT_EQ(StatusCodeNameIn(load.err), "") << load.err;
  EXPECT_EQ(octod_.Ctl("health").exit_code, 0) << "octod stays up";
}

// A flipped byte in a layer streamed from disk: DATA_LOSS naming the file.
TEST_F(OctodCudaTest, CorruptedStreamedLayerIsDataLossAndOctodStaysUp) {
  ASSERT_TRUE(octod_.Start(CudaArgs(1, {"--layer-budget", std::to_string(largest_)})));
  const std::vector<int> good = Tokens(4);
  ASSERT_EQ(good.size(), 4u);
  const std::string file = ModelDir("m") + "/layer_005.bin";
  auto flip = [&] { FlipMiddleByte(file); };
  flip();
  const RunResult bad = Greedy(4);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("layer_005.bin: checksum mismatch"), std::string::npos) << bad.err;
  EXPECT_EQ(StatusCodeNameIn(bad.err), "") << bad.err;
  EXPECT_EQ(octod_.Ctl("health").exit_code, 0);
  flip();  // whole again: the pipeline recovers
  EXPECT_EQ(Tokens(4), good);
}

}  // namespace

// Flags that name what is wrong, CUDA device or not.
TEST_F(OctodTest, BadBackendFlagsAreNamed) {
  for (const auto& [flag, value, needle] :
       std::vector<std::tuple<std::string, std::string, std::string>>{{"--backend", "gpu", "backend"},
                                                                       {"--staging-buffers", "1", "staging-buffers"},
                                                                       {"--gpu", "99", "gpu"},
                                                                       {"--vram-budget", "lots", "vram-budget"}}) {
    const RunResult r = RunCommand({OctodPath(), "--socket", dir_.Path("x.sock"), "--models-root", dir_.Path("root"),
                                    flag, value});
    EXPECT_NE(r.exit_code, 0) << flag << " " << value;
    EXPECT_NE((r.err + r.out).find(needle), std::string::npos) << flag << ": " << r.err;
  }
}

}  // namespace octo::testing
