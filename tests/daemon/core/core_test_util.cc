#include "tests/daemon/core/core_test_util.h"

#include <chrono>

#include "daemon/engine/model_files.h"
#include "gtest/gtest.h"
#include "storage/decompose.h"
#include "storage/manifest.h"
#include "tests/storage/test_models.h"

namespace octo::testing {

void MakeModelDir(const std::string& root, const std::string& name, const std::string& preset,
                  const std::string& type, uint32_t n_layers, uint64_t seed) {
  const std::string gguf = root + "/" + name + ".gguf";
  GenerateModel(gguf, preset, type, [n_layers](ModelShape& s) { s.n_layers = n_layers; }, seed);
  ASSERT_TRUE(Decompose(gguf, root + "/" + name, DecomposeOptions{}).ok());
}

void MakeWidenedModelDir(const std::string& root, const std::string& name, const std::string& small,
                         uint32_t n_layers, float extra_layer_norm) {
  const std::string gguf = root + "/" + name + ".gguf";
  GenerateWidenedModel(root + "/" + small + ".gguf", gguf, n_layers, extra_layer_norm);
  ASSERT_TRUE(Decompose(gguf, root + "/" + name, DecomposeOptions{}).ok());
}

FileLayerStream::FileLayerStream(const LayerStreamOptions& options) : options_(options) {}

LayerStreamFactory FileLayerStream::Factory() {
  return [](const LayerStreamOptions& options) -> absl::StatusOr<std::unique_ptr<LayerStream>> {
    return std::make_unique<FileLayerStream>(options);
  };
}

absl::StatusOr<StreamedLayer> FileLayerStream::Acquire(uint32_t layer) {
  absl::StatusOr<Manifest> manifest = ReadManifest(options_.model_dir);
  if (!manifest.ok()) return manifest.status();
  const ManifestFile* file = manifest->Layer(layer);
  if (file == nullptr) return absl::InvalidArgumentError("no such layer");
  if (file->size > options_.slot_bytes) return absl::InternalError("layer larger than the slot");
  const auto start = std::chrono::steady_clock::now();
  absl::Status read = ReadModelFile(options_.model_dir, *file, buffer_);
  if (!read.ok()) return read;
  bytes_read_ += file->size;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return StreamedLayer{.data = buffer_.data(), .size = file->size, .load_seconds = seconds, .wait_seconds = seconds};
}

LoaderStats FileLayerStream::stats() const {
  LoaderStats s;
  s.running = true;
  s.bytes_read = bytes_read_;
  s.io_mode = "in-process";
  return s;
}

void CollectingSink::OnStarted(const std::string& id, int) {
  std::lock_guard<std::mutex> lock(mu_);
  session_id = id;
  ++started;
}

void CollectingSink::OnToken(const GeneratedToken& token) {
  std::lock_guard<std::mutex> lock(mu_);
  tokens.push_back(token.id);
  generated.push_back(token);
  text += token.text;
  cv_.notify_all();
}

void CollectingSink::OnDone(const absl::Status& s, const std::string& finish, const std::string& tail,
                            const JobStats& st) {
  std::lock_guard<std::mutex> lock(mu_);
  status = s;
  finish_reason = finish;
  text += tail;
  stats = st;
  ++done;
  cv_.notify_all();
}

bool CollectingSink::Wait(double seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return done > 0; });
}

bool CollectingSink::WaitTokens(size_t n, double seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return tokens.size() >= n || done > 0; });
}

RuntimeOptions TestRuntimeOptions(const std::string& root) {
  RuntimeOptions o;
  o.models_root = root;
  o.n_threads = 2;
  o.layer_budget_bytes = 0;
  o.auto_budget_bytes = 1ull << 30;
  o.kv_budget_bytes = 256ull << 20;
  o.session_context = 512;
  return o;
}

GenerateJob GreedyJob(const std::string& prompt, int max_tokens, const std::string& session_id) {
  GenerateJob job;
  job.prompt = prompt;
  job.session_id = session_id;
  job.sampling.temperature = 0;
  job.sampling.max_tokens = max_tokens;
  return job;
}

std::shared_ptr<CollectingSink> Submit(Runtime& runtime, const GenerateJob& job) {
  auto sink = std::make_shared<CollectingSink>();
  absl::StatusOr<std::shared_ptr<JobHandle>> handle = runtime.Submit(job, sink);
  EXPECT_TRUE(handle.ok()) << handle.status();
  return sink;
}

uint64_t LargestLayerBytes(const std::string& dir) {
  absl::StatusOr<Manifest> manifest = ReadManifest(dir);
  EXPECT_TRUE(manifest.ok()) << manifest.status();
  uint64_t largest = 0;
  for (uint32_t l = 0; manifest.ok() && l < manifest->config.n_layers; ++l) {
    largest = std::max(largest, manifest->Layer(l)->size);
  }
  return largest;
}

std::shared_ptr<CollectingSink> RunGreedy(Runtime& runtime, const std::string& prompt, int max_tokens,
                                          const std::string& session_id) {
  std::shared_ptr<CollectingSink> sink = Submit(runtime, GreedyJob(prompt, max_tokens, session_id));
  EXPECT_TRUE(sink->Wait());
  return sink;
}

}  // namespace octo::testing
