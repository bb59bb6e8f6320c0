// moe_bench: selective expert streaming against whole-layer streaming, on
// one MoE model directory (format 2), through the runtime and the real
// octo-loader. Every layer but the first and last streams from disk through
// a two-slot ring. Prints each figure beside its limit:
//   - bytes read per token: whole layers, selective, and the minimum (each
//     pass's dense parts plus the experts it routed to, once each), with a
//     cold expert cache (none) -- target: selective <= 1.3x the minimum;
//   - decode tokens/s, whole layers and selective -- target: >= 5x;
//   - the prediction's hit rate (routed experts it had named) and the reads
//     it issued that no pass used;
//   - the same at 8 concurrent sessions, and with the auto expert cache;
//   - prefill tokens/s for a prompt of --prefill tokens (512), streamed
//     selectively (a prompt that long routes to nearly every expert), with
//     the bytes read and the time the pass waited on them.
// Bytes per token = loader bytes read during the run / tokens generated
// (one pass per token at one session: the prompt is one or two tokens).
#include <algorithm>
#include <cstdio>
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
  std::string loader;
  int threads = 0;
  int tokens = 16;
  int sessions = 8;
  bool page_cache = false;
  int prefill = 512;
  bool prefill_only = false;
};

struct Run {
  double tokens_per_second = 0;  // aggregate decode
  double bytes_per_token = 0;
  double min_bytes_per_token = 0;  // dense parts + routed experts (selective runs)
  ExpertReport experts;            // the run's share of the counters
  bool ok = true;
};

ExpertReport Minus(const ExpertReport& a, const ExpertReport& b) {
  ExpertReport d = a;
  d.routed -= b.routed;
  d.routed_from_disk -= b.routed_from_disk;
  d.predicted -= b.predicted;
  d.prefetched -= b.prefetched;
  d.prefetch_wasted -= b.prefetch_wasted;
  d.dense_bytes_read -= b.dense_bytes_read;
  d.expert_bytes_read -= b.expert_bytes_read;
  d.cache_hits -= b.cache_hits;
  d.cache_misses -= b.cache_misses;
  return d;
}

// `n` concurrent greedy jobs of `tokens` tokens each.
Run Generate(Runtime& runtime, int n, int tokens, uint64_t expert_block) {
  const RuntimeReport before = runtime.Report();
  const JobsRun jobs = RunJobs(runtime, GreedyLetterJobs(n, tokens));
  Run run;
  run.ok = jobs.ok;
  if (!jobs.submitted) return run;
  const double generated = jobs.generated;
  const RuntimeReport after = runtime.Report();
  run.tokens_per_second = jobs.decode_tokens_per_second;
  const double bytes = static_cast<double>(after.loader.bytes_read - before.loader.bytes_read);
  run.experts = Minus(after.residency.experts, before.residency.experts);
  if (generated > 0) {
    run.bytes_per_token = bytes / generated;
    run.min_bytes_per_token =
        (static_cast<double>(run.experts.dense_bytes_read) + static_cast<double>(run.experts.routed) * expert_block) /
        generated;
  }
  return run;
}

std::unique_ptr<Runtime> Start(const Flags& flags, uint64_t budget, bool selective, uint64_t expert_cache) {
  const std::string& dir = flags.model_dir;
  const size_t slash = dir.find_last_of('/');
  RuntimeOptions options;
  options.models_root = slash == std::string::npos ? "." : dir.substr(0, slash);
  options.model = slash == std::string::npos ? dir : dir.substr(slash + 1);
  options.loader_path = flags.loader;
  options.n_threads = flags.threads;
  options.direct_io = !flags.page_cache;
  options.kv_budget_bytes = 4ull << 30;
  options.session_context = std::max(512, flags.prefill + flags.tokens + 8);
  options.layer_budget_bytes = budget;
  options.selective_experts = selective;
  options.expert_cache_bytes = expert_cache;
  absl::StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(options);
  if (!runtime.ok()) {
    std::fprintf(stderr, "%s\n", runtime.status().ToString().c_str());
    return nullptr;
  }
  return std::move(*runtime);
}

// One job whose prompt is `n` token ids, generating one token: the prompt
// is one pass at the default prefill chunk (512).
void Prefill(Runtime& runtime, int n, uint32_t vocab) {
  const RuntimeReport before = runtime.Report();
  GenerateJob job;
  for (int i = 0; i < n; ++i) job.prompt_tokens.push_back(static_cast<int32_t>((i * 37 + 11) % vocab));
  job.add_bos = false;
  job.sampling.temperature = 0;
  job.sampling.max_tokens = 1;
  const JobsRun run = RunJobs(runtime, {job});
  if (!run.ok) return;
  const RuntimeReport after = runtime.Report();
  const JobStats& st = run.jobs[0]->stats;
  std::printf("prefill %d tokens, selective streaming, 1 session: %.1f tok/s (%.2f s; waited on layers %.2f s, "
              "computed %.2f s), %.1f MB read\n",
              st.prompt_tokens, st.prefill_seconds > 0 ? st.prompt_tokens / st.prefill_seconds : 0,
              st.prefill_seconds, st.load_wait_seconds, st.compute_seconds,
              (after.loader.bytes_read - before.loader.bytes_read) / 1e6);
}

void PrintSelective(const char* what, const Run& run, const Run& whole) {
  const ExpertReport& e = run.experts;
  std::printf("%s: %.2f tok/s (%.2fx whole layers; target >= 5x), %.1f MB read per token "
              "(%.2fx the minimum of %.1f MB; target <= 1.3x)\n",
              what, run.tokens_per_second, whole.tokens_per_second > 0 ? run.tokens_per_second / whole.tokens_per_second : 0,
              run.bytes_per_token / 1e6, run.min_bytes_per_token > 0 ? run.bytes_per_token / run.min_bytes_per_token : 0,
              run.min_bytes_per_token / 1e6);
  std::printf("    prediction: named %.0f%% of the %llu experts routed from disk; %llu read ahead, %llu of them unused; "
              "cache hits %llu, misses %llu\n",
              e.routed_from_disk > 0 ? 100.0 * e.predicted / e.routed_from_disk : 0,
              static_cast<unsigned long long>(e.routed_from_disk), static_cast<unsigned long long>(e.prefetched),
              static_cast<unsigned long long>(e.prefetch_wasted), static_cast<unsigned long long>(e.cache_hits),
              static_cast<unsigned long long>(e.cache_misses));
}

int RunBench(const Flags& flags) {
  absl::StatusOr<Manifest> manifest = ReadManifest(flags.model_dir);
  if (!manifest.ok()) {
    std::fprintf(stderr, "%s\n", manifest.status().ToString().c_str());
    return 1;
  }
  const ModelConfig& c = manifest->config;
  const ManifestFile& sample = *manifest->Layer(c.n_layers > 1 ? 1 : 0);
  if (c.n_experts == 0 || !sample.experts.has_value()) {
    std::fprintf(stderr, "%s: not a MoE model directory of format 2 (re-decompose it)\n", flags.model_dir.c_str());
    return 1;
  }
  uint64_t largest = 0, streamed_total = 0;
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    largest = std::max(largest, manifest->Layer(l)->size);
    if (l > 0 && l + 1 < c.n_layers) streamed_total += manifest->Layer(l)->size;
  }
  const uint64_t block = sample.experts->stride;
  std::printf("model %s: %s, %u layers (%u streamed), %u experts (%u per token) of %.2f MB, dense part %.2f MB, "
              "layer %.1f MB; %s reads\n",
              flags.model_dir.c_str(), c.architecture.c_str(), c.n_layers, c.n_layers - 2, c.n_experts,
              c.n_experts_used, block / 1e6, sample.experts->offset / 1e6, sample.size / 1e6,
              flags.page_cache ? "page-cache" : "O_DIRECT");
  const uint64_t ring = 4 * largest;  // the first and last layer, two slots
  if (flags.prefill_only) {
    std::unique_ptr<Runtime> rt = Start(flags, ring, /*selective=*/true, 0);
    if (rt == nullptr) return 1;
    Generate(*rt, 1, 2, block);
    Prefill(*rt, flags.prefill, c.vocab_size);
    return 0;
  }

  std::unique_ptr<Runtime> whole_rt = Start(flags, ring, /*selective=*/false, 0);
  if (whole_rt == nullptr) return 1;
  Generate(*whole_rt, 1, 2, block);  // warm-up
  const Run whole = Generate(*whole_rt, 1, flags.tokens, block);
  std::printf("whole layers, 1 session: %.3f tok/s, %.1f MB read per token (the streamed layers: %.1f MB)\n",
              whole.tokens_per_second, whole.bytes_per_token / 1e6, streamed_total / 1e6);
  const Run whole_n = Generate(*whole_rt, flags.sessions, flags.tokens, block);
  std::printf("whole layers, %d sessions: aggregate %.3f tok/s, %.1f MB read per token\n", flags.sessions,
              whole_n.tokens_per_second, whole_n.bytes_per_token / 1e6);
  whole_rt.reset();

  std::unique_ptr<Runtime> cold_rt = Start(flags, ring, /*selective=*/true, 0);
  if (cold_rt == nullptr) return 1;
  Generate(*cold_rt, 1, 2, block);
  PrintSelective("selective, no expert cache, 1 session", Generate(*cold_rt, 1, flags.tokens, block), whole);
  PrintSelective(absl::StrFormat("selective, no expert cache, %d sessions", flags.sessions).c_str(),
                 Generate(*cold_rt, flags.sessions, flags.tokens, block), whole_n);
  if (flags.prefill > 0) Prefill(*cold_rt, flags.prefill, c.vocab_size);
  cold_rt.reset();

  // With an expert cache: a quarter of all experts' bytes, beside the ring.
  const uint64_t cache = uint64_t{c.n_experts} * block * (c.n_layers - 2) / 4;
  std::unique_ptr<Runtime> cached_rt = Start(flags, ring + cache, /*selective=*/true, cache);
  if (cached_rt == nullptr) return 1;
  Generate(*cached_rt, 1, 2, block);
  PrintSelective(absl::StrFormat("selective, expert cache of %.0f MB (warming), 1 session", cache / 1e6).c_str(),
                 Generate(*cached_rt, 1, flags.tokens, block), whole);
  PrintSelective(absl::StrFormat("selective, expert cache of %.0f MB (warming), %d sessions", cache / 1e6,
                                 flags.sessions).c_str(),
                 Generate(*cached_rt, flags.sessions, flags.tokens, block), whole_n);
  const RuntimeReport report = cached_rt->Report();
  std::printf("loader: %.2f GB/s over %.2f GB read (%s)\n", report.loader.read_gbps, report.loader.bytes_read / 1e9,
              report.loader.io_mode.c_str());
  return 0;
}

}  // namespace
}  // namespace octo

int main(int argc, char** argv) {
  octo::Flags flags;
  CLI::App app{"moe_bench: selective expert streaming against whole-layer streaming"};
  app.add_option("model_dir", flags.model_dir, "Decomposed MoE model directory (format 2)")->required();
  app.add_option("--loader", flags.loader, "octo-loader executable")->required();
  app.add_option("-t,--threads", flags.threads, "Threads (0: one per core)");
  app.add_option("-n,--tokens", flags.tokens, "Tokens per session")->check(CLI::Range(2, 4096));
  app.add_option("--sessions", flags.sessions, "Concurrent sessions for the batched figures")->check(CLI::Range(1, 64));
  app.add_flag("--page-cache", flags.page_cache, "Read through the page cache (default: O_DIRECT)");
  app.add_option("--prefill", flags.prefill, "Prompt tokens for the prefill figure (0: none)")
      ->check(CLI::Range(0, 4096));
  app.add_flag("--prefill-only", flags.prefill_only, "Only the prefill figure");
  CLI11_PARSE(app, argc, argv);
  return octo::RunBench(flags);
}
