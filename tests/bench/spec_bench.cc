// spec_bench: speculative decoding of a streamed target, through the runtime
// and the real octo-loader. Every layer of the target but the first and last
// streams from disk through a two-slot ring (O_DIRECT); the draft model is
// resident. Prints each figure beside the plain streamed decode it is
// measured against, in the same run:
//   - decode tokens/s, 1 session: no draft, a linear draft, a draft tree;
//   - each draft's acceptance (accepted / proposed draft tokens; a tree's
//     proposals include its branches not taken, so it is judged at the
//     linear draft's acceptance) and the tokens per target pass (generated /
//     passes that decided tokens);
//   - the same with --sessions concurrent sessions (aggregate tokens/s);
//   - whether the drafted runs gave the plain run's tokens (greedy: they
//     must, token for token).
// Target: a draft gives at least 3x the plain tokens/s at an acceptance of
// 0.8 or more. Decode tokens/s = (generated - 1) / decode seconds, the
// slowest session's for the concurrent figures (the prompt's pass is
// prefill).
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

constexpr double kTargetSpeedup = 3.0;
constexpr double kTargetAcceptance = 0.8;

struct Flags {
  std::string target_dir, draft_dir;
  std::string loader;
  int threads = 0;
  int tokens = 32;
  int sessions = 4;
  int draft_max = 8;
  int tree_nodes = 24;
  int tree_branches = 2;
  bool page_cache = false;
};

struct Run {
  bool ok = true;
  double tokens_per_second = 0;  // aggregate decode
  double acceptance = 0;
  double tokens_per_pass = 0;
  // Per target pass (the sessions share them): computing, waiting for the
  // loader, and the draft's passes before it (the rest of the decode time).
  double compute_per_pass = 0, wait_per_pass = 0, other_per_pass = 0;
  std::vector<std::vector<int32_t>> tokens;  // per session
};

// `n` concurrent greedy jobs of `tokens` tokens each, drafting with `draft`.
Run Generate(Runtime& runtime, int n, int tokens, const std::string& draft) {
  std::vector<GenerateJob> jobs = GreedyLetterJobs(n, tokens);
  for (GenerateJob& job : jobs) job.draft_model = draft;
  const JobsRun done = RunJobs(runtime, jobs);
  Run run;
  run.ok = done.ok;
  if (!done.submitted) return run;
  const std::vector<std::shared_ptr<JobWaiter>>& sinks = done.jobs;
  double passes = 0, proposed = 0, accepted = 0;
  for (const auto& s : sinks) {
    passes += s->stats.target_passes;
    proposed += s->stats.draft_proposed;
    accepted += s->stats.draft_accepted;
    run.tokens.push_back(s->tokens);
  }
  run.tokens_per_second = done.decode_tokens_per_second;
  run.acceptance = proposed > 0 ? accepted / proposed : 0;
  run.tokens_per_pass = passes > 0 ? done.generated / passes : 0;
  if (!sinks.empty() && sinks[0]->stats.target_passes > 1) {
    const JobStats& s = sinks[0]->stats;
    const double decode_passes = s.target_passes - 1;  // the first decided the prompt's token
    run.compute_per_pass = s.compute_seconds / s.target_passes;
    run.wait_per_pass = s.load_wait_seconds / s.target_passes;
    run.other_per_pass = std::max(0.0, s.decode_seconds / decode_passes - run.compute_per_pass - run.wait_per_pass);
  }
  return run;
}

std::unique_ptr<Runtime> Start(const Flags& flags, const std::string& root, const std::string& target,
                               uint64_t budget, int tree_nodes) {
  RuntimeOptions options;
  options.models_root = root;
  options.model = target;
  options.loader_path = flags.loader;
  options.n_threads = flags.threads;
  options.direct_io = !flags.page_cache;
  options.kv_budget_bytes = 4ull << 30;
  options.session_context = std::max(256, flags.tokens + 64);
  options.layer_budget_bytes = budget;
  options.speculation.draft_max = flags.draft_max;
  options.speculation.tree_nodes = tree_nodes;
  options.speculation.tree_branches = flags.tree_branches;
  absl::StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(options);
  if (!runtime.ok()) {
    std::fprintf(stderr, "%s\n", runtime.status().ToString().c_str());
    return nullptr;
  }
  return std::move(*runtime);
}

void PrintPass(const Run& run) {
  std::printf("  per target pass: %.3f s computing, %.3f s waiting for the loader, %.3f s else (draft passes)\n",
              run.compute_per_pass, run.wait_per_pass, run.other_per_pass);
}

// `acceptance` decides whether the target applies: a linear draft's own; a
// tree's proposed tokens include the branches not taken, so it is judged at
// the linear draft's acceptance (the same draft model).
void Print(const std::string& what, const Run& run, const Run& plain, double acceptance) {
  const double speedup = plain.tokens_per_second > 0 ? run.tokens_per_second / plain.tokens_per_second : 0;
  const bool same = run.tokens == plain.tokens;
  std::printf("%s: %.3f tok/s = %.2fx no draft (target >= %.1fx at acceptance >= %.1f: %s); acceptance %.2f, "
              "%.2f tokens per target pass; tokens %s\n",
              what.c_str(), run.tokens_per_second, speedup, kTargetSpeedup, kTargetAcceptance,
              acceptance < kTargetAcceptance ? "acceptance below" : (speedup >= kTargetSpeedup ? "OK" : "BELOW"),
              run.acceptance, run.tokens_per_pass, same ? "the same as without a draft" : "DIFFER");
  PrintPass(run);
}

// root and name of a model directory path.
std::pair<std::string, std::string> Split(const std::string& dir) {
  const size_t slash = dir.find_last_of('/');
  if (slash == std::string::npos) return {".", dir};
  return {dir.substr(0, slash), dir.substr(slash + 1)};
}

int RunBench(const Flags& flags) {
  absl::StatusOr<Manifest> target = ReadManifest(flags.target_dir), draft = ReadManifest(flags.draft_dir);
  for (const auto* m : {&target, &draft}) {
    if (!m->ok()) {
      std::fprintf(stderr, "%s\n", m->status().ToString().c_str());
      return 1;
    }
  }
  const auto [root, target_name] = Split(flags.target_dir);
  const auto [draft_root, draft_name] = Split(flags.draft_dir);
  if (draft_root != root) {
    std::fprintf(stderr, "the draft must sit beside the target (one models root)\n");
    return 1;
  }
  const ModelConfig& c = target->config;
  uint64_t largest = 0, streamed = 0, draft_bytes = 0;
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    largest = std::max(largest, target->Layer(l)->size);
    if (l > 0 && l + 1 < c.n_layers) streamed += target->Layer(l)->size;
  }
  for (const ManifestFile& f : draft->files) draft_bytes += f.size;
  std::printf("target %s: %s, dim %u, %u layers (%u streamed, %.2f GB per pass, %s); draft %s: dim %u, %u layers, "
              "%.0f MB resident; vocabulary %u\n",
              target_name.c_str(), c.architecture.c_str(), c.dim, c.n_layers, c.n_layers - 2, streamed / 1e9,
              flags.page_cache ? "page cache" : "O_DIRECT", draft_name.c_str(), draft->config.dim,
              draft->config.n_layers, draft_bytes / 1e6, c.vocab_size);
  const uint64_t budget = 4 * largest;  // the first and last layer, two ring slots

  std::unique_ptr<Runtime> linear_rt = Start(flags, root, target_name, budget, 0);
  if (linear_rt == nullptr) return 1;
  Generate(*linear_rt, 1, 2, draft_name);  // warm-up: loads the draft, fills the ring
  const Run plain = Generate(*linear_rt, 1, flags.tokens, "none");
  std::printf("no draft, 1 session: %.3f tok/s, %.2f tokens per target pass\n", plain.tokens_per_second,
              plain.tokens_per_pass);
  PrintPass(plain);
  const Run linear = Generate(*linear_rt, 1, flags.tokens, draft_name);
  Print(absl::StrFormat("linear draft (k <= %d), 1 session", flags.draft_max), linear, plain, linear.acceptance);
  const Run plain_n = Generate(*linear_rt, flags.sessions, flags.tokens, "none");
  std::printf("no draft, %d sessions: aggregate %.3f tok/s\n", flags.sessions, plain_n.tokens_per_second);
  PrintPass(plain_n);
  const Run linear_n = Generate(*linear_rt, flags.sessions, flags.tokens, draft_name);
  Print(absl::StrFormat("linear draft, %d sessions (aggregate)", flags.sessions), linear_n, plain_n,
        linear_n.acceptance);
  const RuntimeReport report = linear_rt->Report();
  linear_rt.reset();

  std::unique_ptr<Runtime> tree_rt = Start(flags, root, target_name, budget, flags.tree_nodes);
  if (tree_rt == nullptr) return 1;
  Generate(*tree_rt, 1, 2, draft_name);
  const Run tree = Generate(*tree_rt, 1, flags.tokens, draft_name);
  Print(absl::StrFormat("draft tree (%d tokens, %d branches), 1 session", flags.tree_nodes, flags.tree_branches),
        tree, plain, linear.acceptance);
  const Run tree_n = Generate(*tree_rt, flags.sessions, flags.tokens, draft_name);
  Print(absl::StrFormat("draft tree, %d sessions (aggregate)", flags.sessions), tree_n, plain_n,
        linear_n.acceptance);
  std::printf("loader: %.2f GB/s over %.2f GB read (%s)\n", report.loader.read_gbps, report.loader.bytes_read / 1e9,
              report.loader.io_mode.c_str());
  const bool ok = plain.ok && linear.ok && tree.ok && plain_n.ok && linear_n.ok && tree_n.ok;
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace octo

int main(int argc, char** argv) {
  octo::Flags flags;
  CLI::App app{"spec_bench: speculative decoding of a streamed target against plain streamed decoding"};
  app.add_option("target_dir", flags.target_dir, "Decomposed target model directory")->required();
  app.add_option("draft_dir", flags.draft_dir, "Decomposed draft model directory, beside the target")->required();
  app.add_option("--loader", flags.loader, "octo-loader executable")->required();
  app.add_option("-t,--threads", flags.threads, "Threads (0: one per core)");
  app.add_option("-n,--tokens", flags.tokens, "Tokens per session")->check(CLI::Range(2, 4096));
  app.add_option("--sessions", flags.sessions, "Concurrent sessions for the batched figures")->check(CLI::Range(1, 64));
  app.add_option("--draft-max", flags.draft_max, "Longest linear draft (a tree's depth)")->check(CLI::Range(1, 31));
  app.add_option("--draft-tree", flags.tree_nodes, "A draft tree's tokens")->check(CLI::Range(1, 63));
  app.add_option("--draft-branches", flags.tree_branches, "A tree node's most children")->check(CLI::Range(1, 63));
  app.add_flag("--page-cache", flags.page_cache, "Read through the page cache (default: O_DIRECT)");
  CLI11_PARSE(app, argc, argv);
  return octo::RunBench(flags);
}
