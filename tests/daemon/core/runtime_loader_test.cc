// The runtime over the real loader: octo-loader is a second process filling
// a shared-memory ring. Killing it mid-generation must not change a single
// token; shutting the runtime down must leave no process or segment behind.
#include <signal.h>
#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/core/runtime.h"
#include "tests/daemon/core/core_test_util.h"
#include "tests/temp_dir.h"

namespace octo::testing {
namespace {

constexpr uint32_t kLayers = 8;

// /dev/shm entries whose name mentions this process's pid.
std::vector<std::string> OurSegments() {
  std::vector<std::string> found;
  const std::string pid = std::to_string(getpid());
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = e.path().filename().string();
    if (name.find("octo") != std::string::npos && name.find(pid) != std::string::npos) found.push_back(name);
  }
  return found;
}

bool ProcessExists(int pid) { return pid > 0 && kill(pid, 0) == 0; }

class RuntimeLoaderTest : public GeneratedModelTest<kLayers> {
 protected:

  // Pinned first and last, two slots, room for one more layer: 5 streamed.
  std::unique_ptr<Runtime> Start() {
    RuntimeOptions options = TestRuntimeOptions(model_dir_->path().string());
    options.model = "m";
    options.loader_path = OCTO_LOADER_PATH;
    options.layer_budget_bytes = LargestLayerBytes(model_dir_->Path("m")) * 5;
    auto runtime = Runtime::Create(options);
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    return runtime.ok() ? std::move(*runtime) : nullptr;
  }

  static std::vector<int32_t> ResidentTokens(const std::string& prompt, int n) {
    RuntimeOptions options = TestRuntimeOptions(model_dir_->path().string());
    options.model = "m";
    auto runtime = RuntimeImpl::Create(options, FileLayerStream::Factory());
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    EXPECT_EQ((*runtime)->Report().residency.streamed_layers, 0u);
    return RunGreedy(**runtime, prompt, n)->tokens;
  }
};

TEST_F(RuntimeLoaderTest, StreamedThroughTheLoaderEqualsResident) {
  auto runtime = Start();
  ASSERT_NE(runtime, nullptr);
  const RuntimeReport before = runtime->Report();
  EXPECT_EQ(before.residency.streamed_layers, 5u);
  EXPECT_EQ(before.residency.ring_slots, 2u);
  EXPECT_TRUE(before.loader.running);
  EXPECT_TRUE(ProcessExists(before.loader.pid));
  auto sink = RunGreedy(*runtime, "Once upon a time", 24);
  ASSERT_TRUE(sink->status.ok()) << sink->status;
  EXPECT_EQ(sink->tokens, ResidentTokens("Once upon a time", 24));
  const RuntimeReport after = runtime->Report();
  EXPECT_GT(after.loader.bytes_read, before.loader.bytes_read);
  EXPECT_FALSE(after.loader.io_mode.empty());
  EXPECT_GE(after.layers[3].loads, 24u);
  EXPECT_LE(after.residency.peak_bytes, after.residency.budget_bytes);
}

TEST_F(RuntimeLoaderTest, KilledLoaderIsRestartedAndTheTokensDoNotChange) {
  auto runtime = Start();
  ASSERT_NE(runtime, nullptr);
  auto sink = Submit(*runtime, GreedyJob("The little dog", 40));
  std::vector<int> killed;
  for (size_t at : {4u, 12u, 25u}) {
    ASSERT_TRUE(sink->WaitTokens(at));
    const int pid = runtime->Report().loader.pid;
    if (pid > 0 && std::find(killed.begin(), killed.end(), pid) == killed.end()) {
      ASSERT_EQ(kill(pid, SIGKILL), 0);
      killed.push_back(pid);
    }
  }
  ASSERT_TRUE(sink->Wait());
  ASSERT_TRUE(sink->status.ok()) << sink->status;
  EXPECT_EQ(sink->tokens, ResidentTokens("The little dog", 40));
  const RuntimeReport report = runtime->Report();
  EXPECT_GE(report.loader.restarts, 1u);
  EXPECT_TRUE(report.loader.running);
  for (int pid : killed) EXPECT_NE(report.loader.pid, pid);
}

TEST_F(RuntimeLoaderTest, ShutdownLeavesNoLoaderAndNoSharedMemory) {
  auto runtime = Start();
  ASSERT_NE(runtime, nullptr);
  const int pid = runtime->Report().loader.pid;
  EXPECT_TRUE(ProcessExists(pid));
  EXPECT_FALSE(OurSegments().empty());
  RunGreedy(*runtime, "Once", 4);
  runtime->Shutdown();
  runtime.reset();
  EXPECT_FALSE(ProcessExists(pid));
  EXPECT_TRUE(OurSegments().empty());
}

}  // namespace
}  // namespace octo::testing
