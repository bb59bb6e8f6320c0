// embed_bench: embeddings through the runtime and the real octo-loader, a
// batch in one request against the same inputs one request at a time, with
// every layer resident and with every layer streamed from disk through a
// two-slot ring (O_DIRECT). Prints, in the same run:
//   - inputs/s of one request of --inputs inputs, and of as many sequential
//     one-input requests, and their ratio beside the target (streamed: the
//     batch at least 8x the sequential rate);
//   - forward passes each way, and the streamed read bound: the inputs/s
//     the loader's measured rate allows when every pass reads the streamed
//     layers once (inputs per pass / (bytes per pass / GB/s));
//   - whether the batch gave each input the sequential run's vector (it
//     must, bit for bit).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "daemon/core/runtime.h"
#include "storage/manifest.h"

namespace octo {
namespace {

constexpr double kTargetStreamedSpeedup = 8.0;

struct Flags {
  std::string model_dir, loader;
  int threads = 0;
  int inputs = 64;
  int tokens = 256;
  int embed_batch_tokens = 2048;
  bool page_cache = false;
};

struct Run {
  bool ok = true;
  double seconds = 0;
  uint64_t passes = 0;
  std::vector<std::vector<float>> vectors;
};

Run Embed(Runtime& runtime, const std::vector<std::vector<int32_t>>& inputs, bool one_request) {
  Run run;
  const uint64_t passes = runtime.Report().passes;
  const auto start = std::chrono::steady_clock::now();
  auto embed = [&](std::vector<std::vector<int32_t>> batch) {
    EmbedJob job;
    job.token_inputs = std::move(batch);
    absl::StatusOr<EmbedResult> result = runtime.Embed(job, nullptr);
    if (!result.ok()) {
      std::fprintf(stderr, "%s\n", result.status().ToString().c_str());
      run.ok = false;
      return;
    }
    for (std::vector<float>& v : result->embeddings) run.vectors.push_back(std::move(v));
  };
  if (one_request) {
    embed(inputs);
  } else {
    for (const std::vector<int32_t>& input : inputs) embed({input});
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.passes = runtime.Report().passes - passes;
  return run;
}

std::unique_ptr<Runtime> Start(const Flags& flags, const std::string& root, const std::string& name,
                               uint64_t budget, uint32_t pins) {
  RuntimeOptions options;
  options.pin_first = options.pin_last = pins;
  options.models_root = root;
  options.model = name;
  options.loader_path = flags.loader;
  options.n_threads = flags.threads;
  options.direct_io = !flags.page_cache;
  options.kv_budget_bytes = 8ull << 30;
  options.layer_budget_bytes = budget;
  options.embed_batch_tokens = static_cast<uint32_t>(flags.embed_batch_tokens);
  absl::StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(options);
  if (!runtime.ok()) {
    std::fprintf(stderr, "%s\n", runtime.status().ToString().c_str());
    return nullptr;
  }
  return std::move(*runtime);
}

// Runs both ways on one runtime; returns false on an error or a differing vector.
bool Measure(const char* what, Runtime& runtime, const std::vector<std::vector<int32_t>>& inputs, uint64_t pass_bytes,
             double target) {
  Embed(runtime, {inputs[0]}, true);  // warm-up: fills the ring, touches the workspaces
  const Run batch = Embed(runtime, inputs, true);
  const Run sequential = Embed(runtime, inputs, false);
  const RuntimeReport report = runtime.Report();
  const double n = static_cast<double>(inputs.size());
  const double batch_rate = batch.seconds > 0 ? n / batch.seconds : 0;
  const double sequential_rate = sequential.seconds > 0 ? n / sequential.seconds : 0;
  const double speedup = sequential_rate > 0 ? batch_rate / sequential_rate : 0;
  const bool same = batch.vectors == sequential.vectors;
  std::printf("%s: one request %.2f inputs/s (%llu passes), one at a time %.2f inputs/s (%llu passes): %.2fx", what,
              batch_rate, static_cast<unsigned long long>(batch.passes), sequential_rate,
              static_cast<unsigned long long>(sequential.passes), speedup);
  if (target > 0) std::printf(" (target >= %.0fx: %s)", target, speedup >= target ? "OK" : "BELOW");
  std::printf("; vectors %s\n", same ? "the same both ways" : "DIFFER");
  if (pass_bytes > 0) {
    std::printf("  loader: %.3f GB read at %.2f GB/s (%s), %u restarts\n", report.loader.bytes_read / 1e9,
                report.loader.read_gbps, report.loader.io_mode.c_str(), report.loader.restarts);
  }
  if (pass_bytes > 0 && report.loader.read_gbps > 0) {
    const double pass_seconds = pass_bytes / (report.loader.read_gbps * 1e9);
    std::printf("  read bound at the loader's %.2f GB/s (%.3f GB a pass): one request %.2f inputs/s, one at a "
                "time %.2f inputs/s\n",
                report.loader.read_gbps, pass_bytes / 1e9,
                batch.passes > 0 ? n / (batch.passes * pass_seconds) : 0, 1.0 / pass_seconds);
  }
  return batch.ok && sequential.ok && same;
}

int RunBench(const Flags& flags) {
  absl::StatusOr<Manifest> manifest = ReadManifest(flags.model_dir);
  if (!manifest.ok()) {
    std::fprintf(stderr, "%s\n", manifest.status().ToString().c_str());
    return 1;
  }
  const size_t slash = flags.model_dir.find_last_of('/');
  const std::string root = slash == std::string::npos ? "." : flags.model_dir.substr(0, slash);
  const std::string name = slash == std::string::npos ? flags.model_dir : flags.model_dir.substr(slash + 1);
  const ModelConfig& c = manifest->config;
  uint64_t largest = 0, streamed = 0;
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    largest = std::max(largest, manifest->Layer(l)->size);
    streamed += manifest->Layer(l)->size;
  }
  std::mt19937 random(7);
  std::vector<std::vector<int32_t>> inputs(static_cast<size_t>(flags.inputs));
  for (std::vector<int32_t>& input : inputs) {
    for (int t = 0; t < flags.tokens; ++t) input.push_back(static_cast<int32_t>(random() % c.vocab_size));
  }
  std::printf("model %s: %s, dim %u, %u layers (streamed: all, %.3f GB a pass, %s), pooling %s; %d inputs of %d "
              "tokens, %d tokens a pass\n",
              name.c_str(), c.architecture.c_str(), c.dim, c.n_layers, streamed / 1e9,
              flags.page_cache ? "page cache" : "O_DIRECT", PoolingName(c.pooling), flags.inputs, flags.tokens,
              flags.embed_batch_tokens);
  bool ok = true;
  {
    std::unique_ptr<Runtime> resident = Start(flags, root, name, 0, 1);
    if (resident == nullptr) return 1;
    ok &= Measure("resident", *resident, inputs, 0, 0);
  }
  std::unique_ptr<Runtime> streaming = Start(flags, root, name, 2 * largest, 0);  // two ring slots, nothing pinned
  if (streaming == nullptr) return 1;
  ok &= Measure("streamed", *streaming, inputs, streamed, kTargetStreamedSpeedup);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace octo

int main(int argc, char** argv) {
  octo::Flags flags;
  CLI::App app{"embed_bench: embeddings in one request against one request per input, resident and streamed"};
  app.add_option("model_dir", flags.model_dir, "Decomposed model directory")->required();
  app.add_option("--loader", flags.loader, "octo-loader executable")->required();
  app.add_option("-t,--threads", flags.threads, "Threads (0: one per core)");
  app.add_option("--inputs", flags.inputs, "Inputs")->check(CLI::Range(1, 2048));
  app.add_option("--tokens", flags.tokens, "Tokens per input")->check(CLI::Range(1, 8192));
  app.add_option("--embed-batch-tokens", flags.embed_batch_tokens, "Embedding tokens a pass carries")
      ->check(CLI::Range(1, 65536));
  app.add_flag("--page-cache", flags.page_cache, "Read through the page cache (default: O_DIRECT)");
  CLI11_PARSE(app, argc, argv);
  return octo::RunBench(flags);
}
