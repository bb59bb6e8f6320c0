// Several models at once: models load on demand beside each other, take
// turns in passes with nothing dropped, make room by unloading idle models
// least recently used first (never one in use), and go when their
// keep_alive runs out.
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "tests/daemon/core/core_test_util.h"
#include "tests/temp_dir.h"

namespace octo::testing {
namespace {

constexpr uint32_t kLayers = 3;

class RuntimeModelsTest : public ::testing::Test {
 protected:
  // Three tiny llamas of different weights: a, b and c.
  static void SetUpTestSuite() {
    root_ = new TempDir();
    MakeModelDir(root_->path().string(), "a", "tiny", "Q4_K_M", kLayers, 42);
    MakeModelDir(root_->path().string(), "b", "tiny", "Q4_K_M", kLayers, 7);
    MakeModelDir(root_->path().string(), "c", "tiny", "Q4_K_M", kLayers, 9);
  }
  static void TearDownTestSuite() { delete root_; }

  // max_loaded_models; a layer budget (0: auto) with no pinned layers.
  std::unique_ptr<RuntimeImpl> Start(uint32_t max_loaded_models = 3, uint64_t layer_budget = 0) {
    RuntimeOptions options = TestRuntimeOptions(root_->path().string());
    options.max_loaded_models = max_loaded_models;
    options.layer_budget_bytes = layer_budget;
    if (layer_budget > 0) options.pin_first = options.pin_last = 0;
    options.log = [this](absl::string_view line) {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_.emplace_back(line);
    };
    auto runtime = RuntimeImpl::Create(options, FileLayerStream::Factory());
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    return runtime.ok() ? std::move(*runtime) : nullptr;
  }

  bool Logged(const std::string& part) {
    std::lock_guard<std::mutex> lock(log_mu_);
    for (const std::string& line : log_) {
      if (absl::StrContains(line, part)) return true;
    }
    return false;
  }
  std::string Log() {
    std::lock_guard<std::mutex> lock(log_mu_);
    return absl::StrJoin(log_, "\n");
  }

  static GenerateJob Job(const std::string& model, int max_tokens = 8) {
    GenerateJob job = GreedyJob("Once upon a time", max_tokens);
    job.model = model;
    return job;
  }
  static std::vector<int32_t> Greedy(Runtime& runtime, const std::string& model, int max_tokens = 8) {
    auto sink = std::make_shared<CollectingSink>();
    const absl::Status submitted = runtime.Submit(Job(model, max_tokens), sink).status();
    EXPECT_TRUE(submitted.ok()) << model << ": " << submitted;
    if (!submitted.ok()) return {};
    EXPECT_TRUE(sink->Wait());
    EXPECT_TRUE(sink->status.ok()) << model << ": " << sink->status;
    return sink->tokens;
  }
  static std::vector<std::string> Loaded(Runtime& runtime) {
    std::vector<std::string> names;
    for (const LoadedModelReport& m : runtime.Report().models) names.push_back(m.summary.path);
    return names;
  }
  // Waits (up to 10 s) until `model` is loaded or not.
  static bool WaitLoaded(Runtime& runtime, const std::string& model, bool loaded) {
    for (int i = 0; i < 500; ++i) {
      const std::vector<std::string> names = Loaded(runtime);
      if ((std::find(names.begin(), names.end(), model) != names.end()) == loaded) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  static inline TempDir* root_ = nullptr;
  std::mutex log_mu_;
  std::vector<std::string> log_;
};

TEST_F(RuntimeModelsTest, TwoModelsServeAtOnceEachAsIfAlone) {
  std::vector<int32_t> alone_a, alone_b;
  {
    auto solo = Start(/*max_loaded_models=*/1);
    alone_a = Greedy(*solo, "a", 24);
    alone_b = Greedy(*solo, "b", 24);  // unloads a: one model at a time
    EXPECT_TRUE(Logged("unloading a (least recently used) to make room for b")) << Log();
  }
  log_.clear();
  ASSERT_NE(alone_a, alone_b) << "different weights";
  auto runtime = Start();
  // Two clients, each on its model, both generating at once: the passes
  // take turns and neither job is dropped or changed.
  for (int round = 0; round < 2; ++round) {
    std::shared_ptr<CollectingSink> a = Submit(*runtime, Job("a", 24));
    std::shared_ptr<CollectingSink> b = Submit(*runtime, Job("b", 24));
    ASSERT_TRUE(a->Wait() && b->Wait());
    EXPECT_TRUE(a->status.ok()) << a->status;
    EXPECT_TRUE(b->status.ok()) << b->status;
    EXPECT_EQ(a->tokens, alone_a);
    EXPECT_EQ(b->tokens, alone_b);
  }
  const RuntimeReport report = runtime->Report();
  ASSERT_EQ(report.models.size(), 2u);
  EXPECT_EQ(report.models[0].summary.path, "a");
  EXPECT_EQ(report.models[1].summary.path, "b");
  // The default (what a request naming no model runs on) is the one loaded last.
  EXPECT_TRUE(report.models[1].is_default);
  ASSERT_TRUE(report.model.has_value());
  EXPECT_EQ(report.model->path, "b");
  EXPECT_EQ(Greedy(*runtime, "", 24), alone_b);
  EXPECT_FALSE(Logged("unloading")) << Log();
}

TEST_F(RuntimeModelsTest, SessionsBelongToTheirModel) {
  auto runtime = Start();
  auto on_a = runtime->CreateSession(0, "me", "chat-a", "a");
  auto on_b = runtime->CreateSession(0, "me", "chat-b", "b");
  ASSERT_TRUE(on_a.ok() && on_b.ok());
  EXPECT_EQ(on_a->model, "a");
  EXPECT_EQ(on_b->model, "b");
  GenerateJob turn = GreedyJob("Once", 4, "chat-a");
  turn.owner = "me";
  std::shared_ptr<CollectingSink> sink = Submit(*runtime, turn);
  ASSERT_TRUE(sink->Wait());
  EXPECT_TRUE(sink->status.ok()) << sink->status;
  // A turn naming another model than its session's is refused, naming both.
  turn.model = "b";
  const absl::Status wrong = runtime->Submit(turn, std::make_shared<CollectingSink>()).status();
  EXPECT_EQ(wrong.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(wrong.message(), "belongs to model 'a'")) << wrong;
  // Each model lists its sessions; unloading one ends its own only.
  RuntimeReport report = runtime->Report();
  ASSERT_EQ(report.models.size(), 2u);
  EXPECT_EQ(report.models[0].sessions, 1u);
  EXPECT_EQ(report.models[1].sessions, 1u);
  EXPECT_EQ(runtime->UnloadModel("").code(), absl::StatusCode::kInvalidArgument) << "two are loaded: name one";
  EXPECT_EQ(runtime->UnloadModel("c").code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(runtime->UnloadModel("a").ok());
  report = runtime->Report();
  ASSERT_EQ(report.sessions.size(), 1u);
  EXPECT_EQ(report.sessions[0].id, "chat-b");
  EXPECT_EQ(report.sessions[0].model, "b");
}

TEST_F(RuntimeModelsTest, AFullRuntimeUnloadsTheLeastRecentlyUsedIdleModel) {
  auto runtime = Start(/*max_loaded_models=*/2);
  Greedy(*runtime, "a", 2);
  Greedy(*runtime, "b", 2);
  Greedy(*runtime, "a", 2);  // a is used after b: b is the least recently used
  Greedy(*runtime, "c", 2);
  EXPECT_EQ(Loaded(*runtime), (std::vector<std::string>{"a", "c"}));
  EXPECT_TRUE(Logged("unloading b (least recently used) to make room for c: 2 models are loaded, max_loaded_models"))
      << Log();
  // A model with an open session is in use: never unloaded for another.
  auto held = runtime->CreateSession(0, "me", "keep", "a");
  ASSERT_TRUE(held.ok());
  Greedy(*runtime, "b", 2);  // unloads c, the idle one
  EXPECT_EQ(Loaded(*runtime), (std::vector<std::string>{"a", "b"}));
  // Both in use (each holds a session): a third is refused at once, saying
  // why and what to do.
  ASSERT_TRUE(runtime->CreateSession(0, "me", "keep-b", "b").ok());
  const absl::Status refused = runtime->Submit(Job("c"), std::make_shared<CollectingSink>()).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "are all in use")) << refused;
  EXPECT_EQ(Loaded(*runtime), (std::vector<std::string>{"a", "b"}));
  // Once a's session closes, c loads in its place.
  ASSERT_TRUE(runtime->CloseSession("keep", "me").ok());
  EXPECT_FALSE(Greedy(*runtime, "c", 2).empty());
  EXPECT_EQ(Loaded(*runtime), (std::vector<std::string>{"b", "c"}));
}

TEST_F(RuntimeModelsTest, TheSharedLayerBudgetIsNeverExceeded) {
  // Room for one model's layers and half another's (no pinned layers: a
  // model streams through one ring slot at the least).
  const uint64_t one_model = kLayers * LargestLayerBytes(root_->Path("a"));
  auto runtime = Start(/*max_loaded_models=*/3, /*layer_budget=*/one_model + one_model / 2);
  const std::vector<int32_t> a = Greedy(*runtime, "a");
  const std::vector<int32_t> b = Greedy(*runtime, "b");
  EXPECT_EQ(Loaded(*runtime), (std::vector<std::string>{"a", "b"})) << "b streams in what a leaves";
  uint64_t held = 0;
  for (const LoadedModelReport& m : runtime->Report().models) held += m.residency.held_bytes;
  EXPECT_LE(held, one_model + one_model / 2);
  // c needs a share too: the least recently used idle model makes room.
  EXPECT_FALSE(Greedy(*runtime, "c").empty());
  held = 0;
  for (const LoadedModelReport& m : runtime->Report().models) held += m.residency.held_bytes;
  EXPECT_LE(held, one_model + one_model / 2) << Log();
  EXPECT_TRUE(Logged("to make room for c")) << Log();
  // Whatever streams, the tokens are the model's.
  EXPECT_EQ(Greedy(*runtime, "a"), a);
  EXPECT_EQ(Greedy(*runtime, "b"), b);
}

// Residency is each model's own: a change names its model (or goes to the
// default one), and an explicit budget must fit beside the others'.
TEST_F(RuntimeModelsTest, ResidencyChangesTheNamedModelOnly) {
  const uint64_t layer = LargestLayerBytes(root_->Path("a"));
  auto runtime = Start(/*max_loaded_models=*/3, /*layer_budget=*/8 * layer);
  const std::vector<int32_t> a = Greedy(*runtime, "a");
  const std::vector<int32_t> b = Greedy(*runtime, "b");
  ResidencyChange stream_a;
  stream_a.model = "a";
  stream_a.budget_bytes = 2 * layer;  // one ring slot and one resident layer
  absl::StatusOr<ResidencyReport> changed = runtime->SetResidency(stream_a);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_GT(changed->streamed_layers, 0u);
  RuntimeReport report = runtime->Report();
  ASSERT_EQ(report.models.size(), 2u);
  EXPECT_GT(report.models[0].residency.streamed_layers, 0u) << "a streams now";
  EXPECT_EQ(report.models[1].residency.streamed_layers, 0u) << "b is as it was";
  EXPECT_EQ(Greedy(*runtime, "a"), a) << "streamed or not, a's tokens";
  EXPECT_EQ(Greedy(*runtime, "b"), b);
  // More than the others leave of the shared budget is refused, naming the sizes.
  ResidencyChange greedy_b;
  greedy_b.model = "b";
  greedy_b.budget_bytes = 8 * layer;
  const absl::Status refused = runtime->SetResidency(greedy_b).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "does not fit beside the other loaded models")) << refused;
  ResidencyChange absent;
  absent.model = "c";
  EXPECT_EQ(runtime->SetResidency(absent).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RuntimeModelsTest, KeepAliveZeroUnloadsTheModelWhenItsJobEnds) {
  auto runtime = Start();
  Greedy(*runtime, "a", 2);
  GenerateJob once = Job("b", 4);
  once.keep_alive = absl::ZeroDuration();
  std::shared_ptr<CollectingSink> sink = Submit(*runtime, once);
  ASSERT_TRUE(sink->Wait());
  EXPECT_TRUE(sink->status.ok()) << sink->status;
  EXPECT_TRUE(WaitLoaded(*runtime, "b", false)) << Log();
  EXPECT_TRUE(Logged("unloading b: idle for its keep_alive (0)")) << Log();
  EXPECT_EQ(Loaded(*runtime), std::vector<std::string>{"a"});
  // A duration: listed with the time left, then gone once it runs out.
  ASSERT_TRUE(runtime->SetKeepAlive("a", absl::Milliseconds(300)).ok());
  const RuntimeReport report = runtime->Report();
  ASSERT_EQ(report.models.size(), 1u);
  ASSERT_TRUE(report.models[0].expires_in_seconds.has_value());
  EXPECT_LE(*report.models[0].expires_in_seconds, 0.3);
  EXPECT_TRUE(WaitLoaded(*runtime, "a", false)) << Log();
  EXPECT_EQ(runtime->SetKeepAlive("a", absl::Seconds(1)).code(), absl::StatusCode::kNotFound);
}

TEST_F(RuntimeModelsTest, AModelInUseIsNotDeletedAndAnIdleOneIsUnloadedFirst) {
  TempDir root;
  MakeModelDir(root.path().string(), "x", "tiny", "Q4_K_M", kLayers, 3);
  RuntimeOptions options = TestRuntimeOptions(root.path().string());
  auto runtime = RuntimeImpl::Create(options, FileLayerStream::Factory());
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  auto session = (*runtime)->CreateSession(0, "me", "s", "x");
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ((*runtime)->DeleteModel("x").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(std::filesystem::exists(root.Path("x")));
  ASSERT_TRUE((*runtime)->CloseSession("s", "me").ok());
  ASSERT_TRUE((*runtime)->DeleteModel("x").ok());
  EXPECT_FALSE(std::filesystem::exists(root.Path("x")));
  EXPECT_TRUE((*runtime)->Report().models.empty());
}

}  // namespace
}  // namespace octo::testing
