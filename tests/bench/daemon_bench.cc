// daemon_bench: the runtime (scheduler + residency + real octo-loader over
// the shared-memory ring) on one model directory. Prints each figure next
// to what it is measured against:
//   (b) streamed vs resident decode tokens/s, one session (target >= 0.9);
//       "streamed" pins the first and last layer and streams the rest
//       through a two-slot ring; reads go through the page cache unless
//       --direct (the files are read once first so the cache holds them).
//   (c) aggregate decode tokens/s with 1, 4 and 16 concurrent sessions while
//       streaming (target: >= 3x at 4, >= 8x at 16 over 1).
// Decode tokens/s of a job = (generated - 1) / decode seconds (the first
// token comes from the prefill pass); aggregate = the sum over sessions of
// decoded tokens / the longest decode time among them (they share passes).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "daemon/core/runtime.h"
#include "storage/manifest.h"
#include "tests/bench/job_waiter.h"

namespace octo {
namespace {

struct Flags {
  std::string model_dir;
  int threads = 0;
  int tokens = 32;
  bool direct = false;
  std::vector<int> sessions = {1, 4, 16};
  std::string loader;
};

// Aggregate decode tokens/s of `n` concurrent greedy jobs.
double Aggregate(Runtime& runtime, int n, int tokens) {
  std::vector<GenerateJob> jobs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    jobs[i].prompt = absl::StrFormat("Once upon a time, story %d", i);
    jobs[i].sampling.temperature = 0;
    jobs[i].sampling.max_tokens = tokens;
  }
  return RunJobs(runtime, jobs).decode_tokens_per_second;  // 0 when a job is refused
}

void WarmPageCache(const std::string& dir) {
  absl::StatusOr<Manifest> m = ReadManifest(dir);
  if (!m.ok()) return;
  std::vector<char> buf(1 << 20);
  for (const ManifestFile& f : m->files) {
    std::ifstream in(dir + "/" + f.name, std::ios::binary);
    while (in.read(buf.data(), buf.size())) {
    }
  }
}

int Run(const Flags& flags) {
  const std::string dir = flags.model_dir;
  const size_t slash = dir.find_last_of('/');
  RuntimeOptions options;
  options.models_root = slash == std::string::npos ? "." : dir.substr(0, slash);
  options.model = slash == std::string::npos ? dir : dir.substr(slash + 1);
  options.loader_path = flags.loader;
  options.n_threads = flags.threads;
  options.direct_io = flags.direct;
  options.kv_budget_bytes = 8ull << 30;
  options.session_context = 1024;
  absl::StatusOr<Manifest> manifest = ReadManifest(dir);
  if (!manifest.ok()) {
    std::fprintf(stderr, "%s\n", manifest.status().ToString().c_str());
    return 1;
  }
  uint64_t largest = 0, total = 0;
  for (uint32_t l = 0; l < manifest->config.n_layers; ++l) {
    largest = std::max(largest, manifest->Layer(l)->size);
    total += manifest->Layer(l)->size;
  }
  if (!flags.direct) WarmPageCache(dir);

  // Resident: every layer in memory.
  options.layer_budget_bytes = total;
  absl::StatusOr<std::unique_ptr<Runtime>> resident = Runtime::Create(options);
  if (!resident.ok()) {
    std::fprintf(stderr, "%s\n", resident.status().ToString().c_str());
    return 1;
  }
  Aggregate(**resident, 1, 4);  // warm-up
  const double resident_rate = Aggregate(**resident, 1, flags.tokens);
  std::printf("backend: %s\n", (*resident)->Report().backend.c_str());
  // For reference: how the compute alone scales with sessions.
  for (int n : flags.sessions) {
    if (n == 1) continue;
    const double rate = Aggregate(**resident, n, flags.tokens);
    std::printf("    resident, %2d sessions: aggregate %.2f tok/s, %.2fx one session (compute alone)\n", n, rate,
                resident_rate > 0 ? rate / resident_rate : 0);
  }
  resident->reset();

  // Streamed: first and last layer pinned, two slots.
  options.layer_budget_bytes = 4 * largest;
  absl::StatusOr<std::unique_ptr<Runtime>> streamed = Runtime::Create(options);
  if (!streamed.ok()) {
    std::fprintf(stderr, "%s\n", streamed.status().ToString().c_str());
    return 1;
  }
  const RuntimeReport plan = (*streamed)->Report();
  std::printf("model %s: %u layers, %.1f MB of layers; streamed: %u layers through %u slots of %.1f MB (%s reads)\n",
              dir.c_str(), manifest->config.n_layers, total / 1e6, plan.residency.streamed_layers,
              plan.residency.ring_slots, plan.residency.slot_bytes / 1e6, flags.direct ? "O_DIRECT" : "page-cache");
  Aggregate(**streamed, 1, 4);
  const double streamed_rate = Aggregate(**streamed, 1, flags.tokens);
  std::printf("(b) decode, 1 session: resident %.2f tok/s, streamed %.2f tok/s, ratio %.2f (target >= 0.90)\n",
              resident_rate, streamed_rate, resident_rate > 0 ? streamed_rate / resident_rate : 0);

  double base = 0;
  for (int n : flags.sessions) {
    const double rate = n == 1 ? streamed_rate : Aggregate(**streamed, n, flags.tokens);
    if (n == 1) base = rate;
    const char* target = n >= 16 ? " (target >= 8x)" : n >= 4 ? " (target >= 3x)" : "";
    std::printf("(c) streamed, %2d sessions: aggregate %.2f tok/s, %.2fx one session%s\n", n, rate,
                base > 0 ? rate / base : 0, target);
  }
  const RuntimeReport report = (*streamed)->Report();
  std::printf("loader: %.2f GB/s over %.2f GB read (%s), overlap %.0f%%, restarts %u\n", report.loader.read_gbps,
              report.loader.bytes_read / 1e9, report.loader.io_mode.c_str(), report.overlap * 100,
              report.loader.restarts);
  return 0;
}

}  // namespace
}  // namespace octo

int main(int argc, char** argv) {
  octo::Flags flags;
  CLI::App app{"daemon_bench: streamed vs resident decode and concurrent sessions"};
  app.add_option("model_dir", flags.model_dir, "Decomposed model directory")->required();
  app.add_option("--loader", flags.loader, "octo-loader executable")->required();
  app.add_option("-t,--threads", flags.threads, "Threads (0: one per core)");
  app.add_option("-n,--tokens", flags.tokens, "Tokens per session")->check(CLI::Range(2, 4096));
  app.add_option("--sessions", flags.sessions, "Concurrent session counts")->delimiter(',');
  app.add_flag("--direct", flags.direct, "O_DIRECT reads (default: page cache)");
  CLI11_PARSE(app, argc, argv);
  return octo::Run(flags);
}
