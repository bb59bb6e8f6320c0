// Loading models as a newcomer names them: a GGUF straight from the models
// root (decomposed into the cache once, then reused), names that differ only
// in "./" or ":latest", symlinked folders, typos answered with the closest
// names, and a load that fails leaving the previous model serving.
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "tests/daemon/core/core_test_util.h"
#include "tests/temp_dir.h"

namespace octo::testing {
namespace {

namespace fs = std::filesystem;
constexpr uint32_t kLayers = 3;

// The runtime's log lines, collected.
struct LogLines {
  std::mutex mu;
  std::vector<std::string> lines;
  bool Has(const std::string& part) {
    std::lock_guard<std::mutex> lock(mu);
    for (const std::string& line : lines) {
      if (absl::StrContains(line, part)) return true;
    }
    return false;
  }
  std::string All() {
    std::lock_guard<std::mutex> lock(mu);
    return absl::StrJoin(lines, "\n");
  }
};

class ModelLoadingTest : public GeneratedModelTest<kLayers> {
 protected:
  // A runtime over `root` (the suite's by default) with no model loaded.
  std::unique_ptr<RuntimeImpl> Start(const std::string& root = "", uint32_t max_loaded_models = 3) {
    RuntimeOptions options = TestRuntimeOptions(root.empty() ? model_dir_->path().string() : root);
    options.cache_dir = cache_.path().string();
    options.max_loaded_models = max_loaded_models;
    options.log = [this](absl::string_view line) {
      std::lock_guard<std::mutex> lock(log_.mu);
      log_.lines.emplace_back(line);
    };
    auto runtime = RuntimeImpl::Create(options, FileLayerStream::Factory());
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    return runtime.ok() ? std::move(*runtime) : nullptr;
  }

  static std::vector<int32_t> Greedy(Runtime& runtime, const std::string& model = "") {
    GenerateJob job = GreedyJob("Once upon", 8);
    job.model = model;
    std::shared_ptr<CollectingSink> sink = Submit(runtime, job);
    EXPECT_TRUE(sink->Wait());
    EXPECT_TRUE(sink->status.ok()) << sink->status;
    return sink->tokens;
  }

  static std::vector<std::string> CacheEntries(const fs::path& cache) {
    std::vector<std::string> entries;
    for (const fs::directory_entry& e : fs::directory_iterator(cache)) {
      if (e.is_directory() && !e.path().filename().string().starts_with(".")) {
        entries.push_back(e.path().filename().string());
      }
    }
    return entries;
  }

  TempDir cache_;
  LogLines log_;
};

TEST_F(ModelLoadingTest, AGgufUnderTheRootServesTheDirectorysTokensAndIsDecomposedOnce) {
  // MakeModelDir left m.gguf beside the directory m it decomposed.
  std::vector<int32_t> want;
  {
    auto runtime = Start();
    ASSERT_TRUE(runtime->LoadModel("m", {}).ok());
    want = Greedy(*runtime);
    auto models = runtime->ListModels();
    ASSERT_TRUE(models.ok()) << models.status();
    std::vector<std::string> names;
    for (const ModelSummary& m : *models) names.push_back(m.path + " " + m.architecture);
    EXPECT_EQ(names, (std::vector<std::string>{"m llama", "m.gguf llama"}));
  }
  {
    auto runtime = Start();
    auto loaded = runtime->LoadModel("m.gguf", {});
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->path, "m.gguf");
    EXPECT_EQ(Greedy(*runtime, "m.gguf"), want);
    EXPECT_TRUE(log_.Has("m.gguf: decomposed into " + cache_.path().string())) << log_.All();
    ASSERT_EQ(CacheEntries(cache_.path()).size(), 1u);
  }
  {
    auto runtime = Start();  // octod started again
    ASSERT_TRUE(runtime->LoadModel("./m.gguf:latest", {}).ok());
    EXPECT_EQ(Greedy(*runtime, "m.gguf"), want);
    EXPECT_TRUE(log_.Has("m.gguf: using its decomposed copy")) << log_.All();
    EXPECT_EQ(CacheEntries(cache_.path()).size(), 1u);
  }
}

TEST_F(ModelLoadingTest, AChangedGgufIsDecomposedAgainAndItsOldCopyRemoved) {
  TempDir root;
  fs::copy_file(model_dir_->Path("m.gguf"), root.Path("x.gguf"));
  {
    auto runtime = Start(root.path().string());
    ASSERT_TRUE(runtime->LoadModel("x.gguf", {}).ok());
  }
  const std::vector<std::string> first = CacheEntries(cache_.path());
  ASSERT_EQ(first.size(), 1u);
  // The file is rewritten (a newer download): a new modification time.
  fs::last_write_time(root.Path("x.gguf"), fs::last_write_time(root.Path("x.gguf")) + std::chrono::hours(1));
  {
    auto runtime = Start(root.path().string());
    ASSERT_TRUE(runtime->LoadModel("x.gguf", {}).ok());
    EXPECT_FALSE(Greedy(*runtime).empty());
  }
  const std::vector<std::string> second = CacheEntries(cache_.path());
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second[0], first[0]);
  EXPECT_TRUE(log_.Has("x.gguf: decomposed into")) << log_.All();
}

TEST_F(ModelLoadingTest, AFailedLoadLeavesThePreviousModelServing) {
  TempDir root;
  fs::copy(model_dir_->Path("m"), root.Path("good"));
  fs::copy(model_dir_->Path("m"), root.Path("broken"));
  fs::remove(root.Path("broken/embed.bin"));  // the load reads it; resolving the name does not
  // One model at a time: "broken" unloads "good" first, which loads again.
  auto runtime = Start(root.path().string(), /*max_loaded_models=*/1);
  ASSERT_TRUE(runtime->LoadModel("good", {}).ok());
  const std::vector<int32_t> want = Greedy(*runtime);
  // A budget set for "good" does not follow to another model.
  ResidencyChange tiny;
  tiny.budget_bytes = 1;
  tiny.pin_first = 0;
  tiny.pin_last = 0;
  EXPECT_FALSE(runtime->SetResidency(tiny).ok());  // smaller than one layer: refused, nothing changes
  ResidencyChange one_layer;
  one_layer.budget_bytes = LargestLayerBytes(root.Path("good")) * 2;
  one_layer.pin_first = 0;
  one_layer.pin_last = 0;
  ASSERT_TRUE(runtime->SetResidency(one_layer).ok());

  auto failed = runtime->LoadModel("broken", {});
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::StrContains(failed.status().message(), "good is still loaded")) << failed.status();
  EXPECT_TRUE(log_.Has("loading broken failed: ")) << log_.All();
  EXPECT_TRUE(log_.Has("good is loaded again")) << log_.All();
  const RuntimeReport report = runtime->Report();
  ASSERT_TRUE(report.model.has_value());
  EXPECT_EQ(report.model->path, "good");
  EXPECT_EQ(Greedy(*runtime, "good"), want);
  EXPECT_TRUE(log_.Has("unloading good (least recently used) to make room for broken")) << log_.All();
  // "good" has its own budget again.
  EXPECT_FALSE(report.residency.auto_budget);
  // Another model that loads does not inherit "good"'s budget.
  fs::copy(model_dir_->Path("m"), root.Path("other"));
  ASSERT_TRUE(runtime->LoadModel("other", {}).ok());
  EXPECT_TRUE(runtime->Report().residency.auto_budget);
}

TEST_F(ModelLoadingTest, ResidencyResetReturnsToTheConfiguredSettings) {
  auto runtime = Start();
  ASSERT_TRUE(runtime->LoadModel("m", {}).ok());
  ResidencyChange change;
  change.pin_first = 0;
  change.budget_bytes = LargestLayerBytes(model_dir_->Path("m")) * 3;
  ASSERT_TRUE(runtime->SetResidency(change).ok());
  EXPECT_FALSE(runtime->Report().residency.auto_budget);
  ResidencyChange reset;
  reset.reset = true;
  auto report = runtime->SetResidency(reset);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->auto_budget);
  EXPECT_EQ(report->pin_first, 1u);
}

TEST_F(ModelLoadingTest, OneModelHasOneName) {
  auto runtime = Start();
  auto loaded = runtime->LoadModel("./m/", {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->path, "m");
  for (const std::string name : {"m", "./m", "m:latest", ".//m/:latest"}) {
    EXPECT_FALSE(Greedy(*runtime, name).empty()) << name;  // the loaded model, by any of its spellings
  }
  GenerateJob other = GreedyJob("x", 1);
  other.model = "m:v2";  // another tag is another model, which the root does not have
  EXPECT_EQ(runtime->Submit(other, std::make_shared<CollectingSink>()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ModelLoadingTest, ASymlinkedFolderIsListedByItsNameAndLoads) {
  TempDir root, elsewhere;
  fs::copy(model_dir_->Path("m"), elsewhere.Path("real"));
  fs::create_directory_symlink(elsewhere.Path("real"), root.Path("linked"));
  auto runtime = Start(root.path().string());
  auto models = runtime->ListModels();
  ASSERT_TRUE(models.ok());
  ASSERT_EQ(models->size(), 1u);
  EXPECT_EQ((*models)[0].path, "linked");
  auto loaded = runtime->LoadModel("linked", {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FALSE(Greedy(*runtime, "linked").empty());
  // A client's name still cannot leave the root.
  EXPECT_EQ(runtime->LoadModel("linked/../../etc", {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ModelLoadingTest, UnknownNamesGetTheClosestNamesAndHowToMakeAModel) {
  auto runtime = Start();
  auto typo = runtime->LoadModel("m.gufg", {});
  EXPECT_EQ(typo.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(typo.status().message(), "did you mean 'm.gguf'")) << typo.status();
  EXPECT_TRUE(log_.Has("load refused: no model 'm.gufg'")) << log_.All();

  TempDir root;
  fs::create_directory(root.Path("empty"));
  auto runtime_empty = Start(root.path().string());
  auto not_a_model = runtime_empty->LoadModel("empty", {});
  EXPECT_EQ(not_a_model.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(not_a_model.status().message(), "octo-ctl decompose FILE.gguf DIR"))
      << not_a_model.status();
  auto nothing = runtime_empty->LoadModel("llama", {});
  EXPECT_TRUE(absl::StrContains(nothing.status().message(), "octo-ctl decompose")) << nothing.status();
}

TEST_F(ModelLoadingTest, EachRequestGetsOneLogLine) {
  RuntimeOptions options = TestRuntimeOptions(model_dir_->path().string());
  options.log_requests = true;
  options.log = [this](absl::string_view line) {
    std::lock_guard<std::mutex> lock(log_.mu);
    log_.lines.emplace_back(line);
  };
  options.model = "m";
  auto runtime = RuntimeImpl::Create(options, FileLayerStream::Factory());
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  GenerateJob job = GreedyJob("Once upon", 5);
  job.origin = "POST /api/generate";
  ASSERT_TRUE(Submit(**runtime, job)->Wait());
  EXPECT_TRUE(log_.Has("POST /api/generate: model m, ")) << log_.All();
  EXPECT_TRUE(log_.Has(" prompt tokens (0 cached), 5 generated, ")) << log_.All();
  EXPECT_TRUE(log_.Has(" s, length")) << log_.All();
  GenerateJob bad = GreedyJob("x", 1, "no-such-session");
  EXPECT_FALSE((*runtime)->Submit(bad, std::make_shared<CollectingSink>()).ok());  // refused before it ran: no line
  int lines = 0;
  for (const std::string& line : log_.lines) lines += absl::StrContains(line, " generated, ");
  EXPECT_EQ(lines, 1);
}

TEST_F(ModelLoadingTest, ABrokenGgufIsRefusedNamingItAndTheLoadedModelServesOn) {
  TempDir root;
  fs::copy(model_dir_->Path("m"), root.Path("good"));
  {
    std::ofstream bad(root.Path("bad.gguf"));
    bad << "GGUF but not really";
  }
  auto runtime = Start(root.path().string());
  ASSERT_TRUE(runtime->LoadModel("good", {}).ok());
  auto failed = runtime->LoadModel("bad.gguf", {});
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::StrContains(failed.status().message(), "bad.gguf")) << failed.status();
  EXPECT_EQ(runtime->Report().model->path, "good");
  EXPECT_FALSE(Greedy(*runtime, "good").empty());
  EXPECT_TRUE(CacheEntries(cache_.path()).empty());
  auto models = runtime->ListModels();
  ASSERT_TRUE(models.ok());
  ASSERT_EQ(models->size(), 2u);
  EXPECT_TRUE(absl::StartsWith((*models)[0].architecture, "unreadable: ")) << (*models)[0].architecture;
}

}  // namespace
}  // namespace octo::testing
