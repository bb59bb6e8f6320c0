// Selective expert streaming through the real octo-loader: a MoE layer
// streamed in two phases (its dense part, then only the experts the pass
// routed to, from the expert cache or the ring) gives the all-resident
// model's tokens and logprobs bit for bit -- with a cold cache, a warm one,
// none at all, and for 8 sessions at once. A damaged expert fails only the
// passes that route to it, naming it; a killed loader changes nothing.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/core/runtime.h"
#include "storage/decompose.h"
#include "storage/manifest.h"
#include "absl/strings/match.h"
#include "tests/daemon/core/core_test_util.h"
#include "tests/shared_data.h"
#include "tests/storage/test_models.h"
#include "tests/temp_dir.h"

namespace octo::testing {
namespace {

constexpr uint32_t kLayers = 6;
constexpr uint32_t kExperts = 16;  // 2 routed per token: a decode step reads 2 of 16

struct Output {
  std::vector<int32_t> tokens;
  std::vector<double> logprobs;
  absl::Status status;
};

Output Collect(const CollectingSink& sink) {
  Output out{sink.tokens, {}, sink.status};
  for (const GeneratedToken& t : sink.generated) {
    out.logprobs.push_back(t.logprob);
    for (const TokenLogprob& top : t.top) out.logprobs.push_back(top.logprob);
  }
  return out;
}

GenerateJob Job(const std::string& prompt, int n, const std::string& session = "") {
  GenerateJob job = GreedyJob(prompt, n, session);
  job.sampling.top_logprobs = 5;
  return job;
}

// One MoE model per parameter: generated (kExperts experts) or ../shared's,
// made when a test first needs it (ctest runs each test in its own process).
class RuntimeExpertsTest : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() { root_ = new TempDir(); }
  static void TearDownTestSuite() { delete root_; }

  void SetUp() override {
    const std::string name = GetParam();
    if (std::filesystem::exists(Dir())) return;
    if (IsShared()) {
      // ../shared's trained-then-widened llama MoE (4 experts, 2 per token).
      const std::string gguf = "models/widened/" + name + ".gguf";
      OCTO_REQUIRE_SHARED(gguf);
      ASSERT_TRUE(Decompose(SharedPath(gguf), Dir(), DecomposeOptions{}).ok());
      return;
    }
    const std::string gguf = root_->Path(name + ".gguf");
    GenerateModel(gguf, name, "Q4_K_M", [](ModelShape& s) {
      s.n_layers = kLayers;
      s.n_experts = kExperts;
    });
    ASSERT_TRUE(Decompose(gguf, Dir(), DecomposeOptions{}).ok());
  }
  bool IsShared() const { return absl::StartsWith(GetParam(), "moe-"); }
  uint32_t Experts() const {
    absl::StatusOr<Manifest> manifest = ReadManifest(Dir());
    return manifest.ok() ? manifest->config.n_experts : 0;
  }
  uint32_t StreamedLayers() const {
    absl::StatusOr<Manifest> manifest = ReadManifest(Dir());
    return manifest.ok() ? manifest->config.n_layers - 2 : 0;
  }

  std::string Dir() const { return root_->Path(GetParam()); }

  RuntimeOptions Options() const {
    RuntimeOptions options = TestRuntimeOptions(root_->path().string());
    options.model = GetParam();
    return options;
  }

  // Everything resident (the in-process stream is never used), one job per prompt.
  std::vector<Output> Resident(const std::vector<std::string>& prompts, int n) const {
    auto runtime = RuntimeImpl::Create(Options(), FileLayerStream::Factory());
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    EXPECT_EQ((*runtime)->Report().residency.streamed_layers, 0u);
    std::vector<Output> out;
    for (const std::string& prompt : prompts) {
      auto sink = Submit(**runtime, Job(prompt, n));
      EXPECT_TRUE(sink->Wait());
      out.push_back(Collect(*sink));
    }
    return out;
  }
  Output Resident(const std::string& prompt, int n) const { return Resident(std::vector<std::string>{prompt}, n)[0]; }

  // Pinned first and last, a ring of two slots, the rest streamed through
  // the real loader, with an expert cache of `cache_experts` blocks.
  std::unique_ptr<Runtime> Streamed(uint64_t cache_experts, std::vector<std::string> loader_args = {},
                                    const std::string& model = "") const {
    const std::string dir = model.empty() ? Dir() : root_->Path(model);
    absl::StatusOr<Manifest> manifest = ReadManifest(dir);
    EXPECT_TRUE(manifest.ok()) << manifest.status();
    const ManifestFile& first = *manifest->Layer(0);
    EXPECT_TRUE(first.experts.has_value()) << "decompose writes per-expert blocks";
    const uint64_t layer = LargestLayerBytes(dir);
    RuntimeOptions options = Options();
    if (!model.empty()) options.model = model;
    options.loader_path = loader_args.empty() ? OCTO_LOADER_PATH : OCTO_FAULTY_LOADER_PATH;
    // At most half a layer's experts: the budget must not hold every layer.
    options.expert_cache_bytes = std::min<uint64_t>(cache_experts, Experts() / 2) * first.experts->stride;
    options.layer_budget_bytes = 4 * layer + options.expert_cache_bytes;
    options.loader_args = std::move(loader_args);
    auto runtime = Runtime::Create(options);
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    if (!runtime.ok()) return nullptr;
    const RuntimeReport report = (*runtime)->Report();
    EXPECT_EQ(report.residency.streamed_layers, StreamedLayers());
    EXPECT_TRUE(report.residency.experts.present);
    EXPECT_EQ(report.residency.experts.two_phase_layers, StreamedLayers());
    EXPECT_EQ(report.residency.experts.cache_capacity_bytes, options.expert_cache_bytes);
    return std::move(*runtime);
  }

  static inline TempDir* root_ = nullptr;
};

void ExpectSame(const Output& got, const Output& want, const std::string& what) {
  ASSERT_TRUE(got.status.ok()) << what << ": " << got.status;
  EXPECT_EQ(got.tokens, want.tokens) << what;
  EXPECT_EQ(got.logprobs, want.logprobs) << what << ": logprobs differ (not bit for bit)";
}

TEST_P(RuntimeExpertsTest, ColdWarmAndNoCacheGiveTheResidentBits) {
  const std::string prompt = "Once upon a time";
  const Output resident = Resident(prompt, 24);
  ASSERT_TRUE(resident.status.ok()) << resident.status;
  for (uint64_t cache_experts : {uint64_t{0}, uint64_t{12}}) {
    const std::string what = absl::StrCat(GetParam(), ", cache of ", cache_experts, " experts");
    auto runtime = Streamed(cache_experts);
    ASSERT_NE(runtime, nullptr);
    auto cold = Submit(*runtime, Job(prompt, 24));
    ASSERT_TRUE(cold->Wait());
    ExpectSame(Collect(*cold), resident, what + ", cold");
    const ExpertReport after_cold = runtime->Report().residency.experts;
    auto warm = Submit(*runtime, Job(prompt, 24));
    ASSERT_TRUE(warm->Wait());
    ExpectSame(Collect(*warm), resident, what + ", warm");
    const RuntimeReport report = runtime->Report();
    const ExpertReport& e = report.residency.experts;
    EXPECT_LE(report.residency.peak_bytes, report.residency.budget_bytes) << what;
    EXPECT_LE(e.cache_held_bytes, e.cache_capacity_bytes) << what;
    if (cache_experts == 0) {
      EXPECT_EQ(e.cache_entries, 0u) << what;
      EXPECT_EQ(e.cache_hits, 0u) << what;
    } else {
      EXPECT_GT(e.cache_entries, 0u) << what;
      EXPECT_GT(e.cache_hits, after_cold.cache_hits) << what << ": the warm run found experts in the cache";
    }
    // Decode steps read the routed experts only: far fewer expert bytes
    // than the streamed layers' whole expert blocks every pass.
    const uint64_t passes = report.passes;
    absl::StatusOr<Manifest> manifest = ReadManifest(Dir());
    ASSERT_TRUE(manifest.ok());
    const uint64_t all_experts = uint64_t{Experts()} * manifest->Layer(1)->experts->stride * StreamedLayers();
    EXPECT_GT(e.expert_bytes_read, 0u) << what;
    // (4 experts, 2 per token: a decode step reads half of them.)
    EXPECT_LT(e.expert_bytes_read, all_experts * passes * (Experts() > 4 ? 1 : 3) / 4) << what;
    EXPECT_GT(e.routed_from_disk, 0u) << what;
  }
}

TEST_P(RuntimeExpertsTest, EightConcurrentSessionsGetTheirSoloBits) {
  const std::vector<std::string> prompts = {"Once",     "The dog", "A cat sat", "Lily",
                                            "One day", "Tom had", "The sun",   "Birds"};
  const std::vector<Output> solo = Resident(prompts, 12);
  auto runtime = Streamed(8);
  ASSERT_NE(runtime, nullptr);
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (const std::string& p : prompts) sinks.push_back(Submit(*runtime, Job(p, 12)));
  for (size_t i = 0; i < sinks.size(); ++i) {
    ASSERT_TRUE(sinks[i]->Wait());
    ExpectSame(Collect(*sinks[i]), solo[i], absl::StrCat(GetParam(), ": session ", i));
  }
}

TEST_P(RuntimeExpertsTest, KilledLoaderWhileExpertsAreReadKeepsTheBits) {
  const Output resident = Resident("The little dog", 30);
  // Slow reads (octo-loader-faulty), so expert reads are in flight when the loader dies.
  auto runtime = Streamed(0, {"--delay-ms", "2"});
  ASSERT_NE(runtime, nullptr);
  auto sink = Submit(*runtime, Job("The little dog", 30));
  std::vector<int> killed;
  for (size_t at : {3u, 10u, 20u}) {
    ASSERT_TRUE(sink->WaitTokens(at));
    const int pid = runtime->Report().loader.pid;
    if (pid > 0 && std::find(killed.begin(), killed.end(), pid) == killed.end()) {
      ASSERT_EQ(kill(pid, SIGKILL), 0);
      killed.push_back(pid);
    }
  }
  ASSERT_TRUE(sink->Wait());
  ExpectSame(Collect(*sink), resident, GetParam());
  EXPECT_GE(runtime->Report().loader.restarts, 1u);
}

// The generated models only: with ../shared's 4 experts most passes read
// whole layers, and format 1 needs the GGUF at hand.
class GeneratedExpertsTest : public RuntimeExpertsTest {};

TEST_P(GeneratedExpertsTest, ADamagedExpertFailsOnlyThePassesRoutedToIt) {
  // A copy of the model with one byte of layer 2's expert 5 flipped.
  const std::string damaged = std::string(GetParam()) + "-damaged";
  std::filesystem::copy(Dir(), root_->Path(damaged), std::filesystem::copy_options::recursive);
  absl::StatusOr<Manifest> manifest = ReadManifest(Dir());
  ASSERT_TRUE(manifest.ok());
  const ManifestFile& file = *manifest->Layer(2);
  const ByteRange expert = ExpertRange(file, 5);
  {
    std::fstream f(root_->Path(damaged) + "/" + file.name, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(expert.offset + expert.bytes / 2));
    char byte = 0;
    f.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x40);
    f.seekp(static_cast<std::streamoff>(expert.offset + expert.bytes / 2));
    f.write(&byte, 1);
  }
  // One-token prompts route each pass to a few of the 16 experts: some
  // passes need expert 5 of layer 2, most do not.
  std::vector<std::string> prompts;
  for (char ch = 'A'; ch <= 'Z'; ++ch) prompts.push_back(std::string(1, ch));
  const std::vector<Output> resident = Resident(prompts, 2);
  auto runtime = Streamed(0, {}, damaged);
  ASSERT_NE(runtime, nullptr);
  int failed = 0, served = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto sink = Submit(*runtime, Job(prompts[i], 2));
    ASSERT_TRUE(sink->Wait());
    if (sink->status.ok()) {
      ++served;
      ExpectSame(Collect(*sink), resident[i], "prompt " + prompts[i]);
      continue;
    }
    ++failed;
    EXPECT_EQ(sink->status.code(), absl::StatusCode::kDataLoss) << sink->status;
    EXPECT_NE(sink->status.message().find("layer_002.bin: expert 5 of layer 2: checksum mismatch"), std::string::npos)
        << sink->status;
  }
  EXPECT_GT(failed, 0) << "no pass routed to the damaged expert";
  EXPECT_GT(served, 0) << "passes that do not route to the damaged expert must succeed";
  EXPECT_GE(runtime->Report().loader.checksum_failures, 1u);
}

TEST_P(GeneratedExpertsTest, AVersion1DirectoryStillLoadsAndStreamsWholeLayers) {
  const std::string v1 = std::string(GetParam()) + "-v1";
  DecomposeOptions decompose;
  decompose.format_version = 1;
  ASSERT_TRUE(Decompose(root_->Path(std::string(GetParam()) + ".gguf"), root_->Path(v1), decompose).ok());
  absl::StatusOr<Manifest> manifest = ReadManifest(root_->Path(v1));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->format_version, 1u);
  EXPECT_FALSE(manifest->Layer(1)->experts.has_value());

  const Output resident = Resident("Once upon a time", 16);
  RuntimeOptions options = Options();
  options.model = v1;
  options.loader_path = OCTO_LOADER_PATH;
  options.layer_budget_bytes = 4 * LargestLayerBytes(root_->Path(v1));
  auto runtime = Runtime::Create(options);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  const RuntimeReport before = (*runtime)->Report();
  EXPECT_EQ(before.residency.streamed_layers, StreamedLayers());
  EXPECT_FALSE(before.residency.experts.present);
  EXPECT_NE(before.residency.experts.not_selective.find("re-decompose"), std::string::npos)
      << before.residency.experts.not_selective;
  auto sink = Submit(**runtime, Job("Once upon a time", 16));
  ASSERT_TRUE(sink->Wait());
  ExpectSame(Collect(*sink), resident, v1);
  const RuntimeReport after = (*runtime)->Report();
  EXPECT_EQ(after.residency.experts.routed, 0u);
  // Every pass read every streamed layer whole.
  EXPECT_GE(after.loader.bytes_read, after.passes * StreamedLayers() * manifest->Layer(1)->size);
}

std::string ParamName(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Architectures, GeneratedExpertsTest,
                         ::testing::Values("tiny-moe", "tiny-qwen2moe", "tiny-qwen3moe"), ParamName);
INSTANTIATE_TEST_SUITE_P(Architectures, RuntimeExpertsTest, ::testing::Values("tiny-moe", "tiny-qwen2moe", "tiny-qwen3moe",
                                                                           "tiny-qwen35moe", "tiny-qwen3next",
                                                                           "moe-Q8_0", "moe-Q4_K_M-mix"),
                         ParamName);

}  // namespace
}  // namespace octo::testing
