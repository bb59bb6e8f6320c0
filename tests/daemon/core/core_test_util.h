// What the daemon-core tests share: a generated model directory, a
// LayerStream that reads files in this process (the real one spawns
// octo-loader; the core's logic does not depend on which), and a sink that
// collects a job's events.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/runtime_impl.h"
#include "daemon/engine/aligned_buffer.h"
#include "daemon/loader/layer_stream.h"
#include "gtest/gtest.h"
#include "tests/temp_dir.h"

namespace octo::testing {

// Decomposes a generated model of `preset` and `type` with n_layers layers
// into root/name. Fails the test on error.
void MakeModelDir(const std::string& root, const std::string& name, const std::string& preset,
                  const std::string& type, uint32_t n_layers, uint64_t seed = 42);

// root/<small>.gguf (written by MakeModelDir from "tiny") widened by
// GenerateWidenedModel (tests/storage/test_models.h) to n_layers layers,
// decomposed into root/name: a target for which `small` is a draft.
void MakeWidenedModelDir(const std::string& root, const std::string& name, const std::string& small,
                         uint32_t n_layers, float extra_layer_norm);

// Reads each acquired layer from disk synchronously, checked; counts the
// streams made and layers read so tests can see the ring's shape.
class FileLayerStream : public LayerStream {
 public:
  explicit FileLayerStream(const LayerStreamOptions& options);
  static LayerStreamFactory Factory();

  void SetOrder(std::vector<uint32_t> order) override { order_ = std::move(order); }
  absl::StatusOr<StreamedLayer> Acquire(uint32_t layer) override;
  void Release(uint32_t) override {}
  // Reads whole layers: every expert is in once acquired.
  void SetTwoPhase(std::vector<bool>) override {}
  absl::Status FetchExperts(uint32_t, const std::vector<uint32_t>&, bool) override { return absl::OkStatus(); }
  void MarkExpertsPresent(uint32_t, const std::vector<uint32_t>&) override {}
  LoaderStats stats() const override;

 private:
  LayerStreamOptions options_;
  std::vector<uint32_t> order_;
  AlignedBuffer buffer_;
  uint64_t bytes_read_ = 0;
};

// Collects one job's events; Wait() blocks until OnDone.
class CollectingSink : public TokenSink {
 public:
  void OnStarted(const std::string& session_id, int prompt_tokens) override;
  void OnToken(const GeneratedToken& token) override;
  void OnDone(const absl::Status& status, const std::string& finish_reason, const std::string& tail,
              const JobStats& stats) override;
  // Blocks until done (at most `seconds`); false on timeout.
  bool Wait(double seconds = 120);
  // Blocks until at least n tokens arrived.
  bool WaitTokens(size_t n, double seconds = 120);

  std::string session_id;
  std::vector<int32_t> tokens;
  std::vector<GeneratedToken> generated;  // every event, whole
  std::string text;
  absl::Status status;
  std::string finish_reason;
  JobStats stats;
  int started = 0;
  int done = 0;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

// Options for a runtime over models under `root`: small budgets, the
// in-process stream.
RuntimeOptions TestRuntimeOptions(const std::string& root);

// A greedy request for max_tokens tokens of `prompt`.
GenerateJob GreedyJob(const std::string& prompt, int max_tokens, const std::string& session_id = "");

// Submits `job` (the test fails if it is refused) and returns its sink.
std::shared_ptr<CollectingSink> Submit(Runtime& runtime, const GenerateJob& job);

// The largest layer file of a model directory.
uint64_t LargestLayerBytes(const std::string& dir);

// A fixture over one generated tiny llama of `n_layers` layers at
// model_dir_->Path("m"), made once per suite.
template <uint32_t n_layers>
class GeneratedModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = new TempDir();
    MakeModelDir(model_dir_->path().string(), "m", "tiny", "Q4_K_M", n_layers);
  }
  static void TearDownTestSuite() { delete model_dir_; }
  static inline TempDir* model_dir_ = nullptr;
};

// Runs a greedy generation of `prompt` to its end; the sink holds the result.
std::shared_ptr<CollectingSink> RunGreedy(Runtime& runtime, const std::string& prompt, int max_tokens,
                                          const std::string& session_id = "");

}  // namespace octo::testing
