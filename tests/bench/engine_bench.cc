// engine_bench: how fast the CPU engine runs a model directory, next to the
// limit the machine's memory sets, all measured in the same run.
//
//   engine_bench [--threads N] [--reps R] ... MODEL_DIR...
//
// For each model directory:
//   1. memory bandwidth (memory_bandwidth.h): memcpy and a read-only scan,
//      best of 5 passes over 512 MiB buffers, on as many threads as the engine;
//   2. weight bytes one decoded token reads (weight_bytes.h);
//   3. the decode bound: bandwidth / bytes per token, the bandwidth being
//      memcpy's bytes copied per second (best of the figures taken before and
//      after the engine's runs). Each copied byte is read once and written
//      once; the bound counts it once, as decoding only reads. Why not 2x:
//      on the 2-core EPYC VM this was written on, a read-only stream
//      reaches 1.2-1.5x memcpy's copied rate, nowhere near 2x, so the
//      read + write figure is a bound no decode could reach. The bounds from the read-only scan and from
//      read + write are printed beside it, with their ratios;
//   4. decode tokens/s at batch 1 (one sequence, after a short prefill, one
//      Forward per token) and at each batch B of --batch (B sequences in
//      each Forward; aggregate tokens/s, and its multiple of batch 1's),
//      median of R runs of N tokens;
//   5. prefill tokens/s for one prompt of P tokens in one Forward;
//      4 and 5 also by the CPU time the engine got (Rate below), the
//      figure to compare kernels by when others' work shares the cores;
//   6. batch-1 decode / bound, next to the target;
// then (unless --no-breakdown) the MatMul share of each pass and the rate
// of every weight matrix (pass_breakdown.h), for the kernel owners.
//
// Not a test: nothing is asserted; the exit status is 1 only when a model
// cannot be opened or run.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "daemon/engine/model.h"
#include "kernels/cpu/simd.h"
#include "storage/status_macros.h"
#include "tests/bench/memory_bandwidth.h"
#include "tests/bench/pass_breakdown.h"
#include "tests/bench/weight_bytes.h"

namespace octo::bench {
namespace {

struct Flags {
  std::vector<std::string> model_dirs;
  int threads = 0;
  bool portable = false;
  int reps = 3;
  int decode_tokens = 16;
  int prompt_tokens = 16;
  std::vector<int> batches = {4, 8, 16};
  int prefill_tokens = 512;
  int prefill_reps = 1;
  int bandwidth_mib = 512;
  int bandwidth_reps = 5;
  double target = 0.6;
  bool breakdown = true;
};

using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Deterministic token ids spread over the vocabulary (the cost of a pass does
// not depend on which tokens, only on how many).
std::vector<int32_t> Tokens(int count, int seed, uint32_t vocab) {
  std::vector<int32_t> tokens(count);
  for (int i = 0; i < count; ++i) {
    tokens[i] =
        static_cast<int32_t>((static_cast<uint64_t>(seed) * 7919u + static_cast<uint64_t>(i) * 104729u + 1) % vocab);
  }
  return tokens;
}

// CPU seconds (user + system) this process has used, all threads.
double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

// A rate two ways: tokens per wall-clock second, and tokens per second of
// the CPU time the engine got, counted per pool thread (tokens / (process
// CPU seconds / threads)): what the run would give with its threads on cores
// of their own. The pool's threads block (not spin) when idle, so on a quiet
// machine the two agree but for the idle time at hand-offs; on a shared one
// (other processes taking the cores) the second is the steadier figure for
// comparing kernels, the first what a user would have seen.
struct Rate {
  double wall = 0;
  double cpu = 0;
};

class RateTimer {
 public:
  explicit RateTimer(int threads) : threads_(threads), start_(Clock::now()), cpu_start_(ProcessCpuSeconds()) {}
  Rate Stop(double tokens) const {
    return Rate{tokens / SecondsSince(start_), tokens / ((ProcessCpuSeconds() - cpu_start_) / threads_)};
  }

 private:
  int threads_;
  Clock::time_point start_;
  double cpu_start_;
};

// `batch` sequences each prefilled with `prompt` tokens (untimed), then
// `n_tokens` passes of one token per sequence. Returns aggregate tokens/s.
absl::StatusOr<Rate> DecodeRate(Model& model, int batch, int prompt, int n_tokens) {
  const uint32_t vocab = model.config().vocab_size;
  std::vector<std::unique_ptr<KvCache>> caches;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SequenceStep> steps;
  for (int b = 0; b < batch; ++b) {
    caches.push_back(model.NewCache(prompt + n_tokens));
    prompts.push_back(Tokens(prompt, b, vocab));
  }
  for (int b = 0; b < batch; ++b) steps.push_back({.kv = caches[b].get(), .tokens = prompts[b]});
  std::vector<float> logits;
  OCTO_RETURN_IF_ERROR(model.Forward(steps, logits));

  std::vector<int32_t> next(batch);
  const RateTimer timer(model.exec().pool->size());
  for (int t = 0; t < n_tokens; ++t) {
    for (int b = 0; b < batch; ++b) {
      next[b] = Tokens(1, 1000 + t * batch + b, vocab)[0];
      steps[b].tokens = std::span<const int32_t>(&next[b], 1);
    }
    OCTO_RETURN_IF_ERROR(model.Forward(steps, logits));
  }
  return timer.Stop(batch * n_tokens);
}

// One Forward over a prompt of `n_tokens`; returns tokens/s.
absl::StatusOr<Rate> PrefillRate(Model& model, int n_tokens) {
  auto kv = model.NewCache(n_tokens);
  const std::vector<int32_t> prompt = Tokens(n_tokens, 7, model.config().vocab_size);
  const SequenceStep step{.kv = kv.get(), .tokens = prompt};
  std::vector<float> logits;
  const RateTimer timer(model.exec().pool->size());
  OCTO_RETURN_IF_ERROR(model.Forward(std::span<const SequenceStep>(&step, 1), logits));
  return timer.Stop(n_tokens);
}

// The median of each figure over `reps` runs.
absl::StatusOr<Rate> MedianOf(int reps, const std::function<absl::StatusOr<Rate>()>& run) {
  std::vector<double> wall, cpu;
  for (int r = 0; r < reps; ++r) {
    OCTO_ASSIGN_OR_RETURN(const Rate rate, run());
    wall.push_back(rate.wall);
    cpu.push_back(rate.cpu);
  }
  return Rate{Median(wall), Median(cpu)};
}

double Gb(double bytes) { return bytes / 1e9; }

// The 1-minute load average: anything else running on the cores skews every
// figure, so the report says how busy the machine was.
double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double load = -1;
  in >> load;
  return load;
}

struct EngineRates {
  Rate decode1;                    // tokens/s, batch 1
  std::vector<Rate> decode_batch;  // aggregate tokens/s, one per flags.batches
  Rate prefill;                    // tokens/s
};

// The batch the breakdown times beside batch 1: the largest asked for.
int BreakdownBatch(const Flags& f) { return *std::max_element(f.batches.begin(), f.batches.end()); }

// parts: decode batch 1, decode batch BreakdownBatch(f), prefill.
void PrintBreakdown(const Flags& f, const std::vector<PassBreakdown>& parts) {
  absl::PrintF(
      "\nwhere a pass goes: the pass and each of its matrices alone (cpu::MatMul, same pool), timed in turn,\n"
      "median of %d (prefill %d)\n",
      f.reps, f.prefill_reps);
  absl::PrintF("  %-8s %-10s %8s | %-18s | %-18s | %-20s\n", "matrix", "type", "MB", "decode b1 ms  GB/s",
               absl::StrFormat("decode b%d ms  GB/s", BreakdownBatch(f)),
               absl::StrFormat("prefill %d ms GFLOP/s", f.prefill_tokens));
  for (size_t r = 0; r < parts[0].roles.size(); ++r) {
    const MatMulRole& role = parts[0].roles[r];
    absl::PrintF("  %-8s %-10s %8.1f |", role.role, role.types, role.bytes / 1e6);
    for (int p = 0; p < 3; ++p) {
      const MatMulRole& x = parts[p].roles[r];
      // Decode: weight bytes streamed per second. Prefill: arithmetic rate.
      const double rate = p == 2 ? 2.0 * x.elements * x.n_rows / x.seconds / 1e9 : Gb(x.bytes) / x.seconds;
      absl::PrintF(" %9.2f %7.1f %s", x.seconds * 1e3, rate, p < 2 ? "|" : "\n");
    }
  }
  auto row = [&](const char* label, auto value_s) {
    absl::PrintF("  %-29s |", label);
    for (int p = 0; p < 3; ++p) {
      const double v = value_s(parts[p]);
      absl::PrintF(" %9.2f %6.0f%% %s", v * 1e3, 100 * v / parts[p].pass_seconds, p < 2 ? "|" : "\n");
    }
  };
  row("all MatMul", [](const PassBreakdown& b) { return b.matmul_seconds; });
  absl::PrintF("  %-29s |", "attention     (ms, GFLOP/s)");
  for (int p = 0; p < 3; ++p) {
    const PassBreakdown& b = parts[p];
    absl::PrintF(" %9.2f %7.1f %s", b.attention_seconds * 1e3, b.attention_flops / b.attention_seconds / 1e9,
                 p < 2 ? "|" : "\n");
  }
  row("attention     (ms, share)", [](const PassBreakdown& b) { return b.attention_seconds; });
  row("rest: norms, rope, silu, ...",
      [](const PassBreakdown& b) { return b.pass_seconds - b.matmul_seconds - b.attention_seconds; });
  row("whole pass", [](const PassBreakdown& b) { return b.pass_seconds; });
  absl::PrintF("  %-29s |", "layers: fastest, slowest ms");
  for (int p = 0; p < 3; ++p) {
    const auto [fastest, slowest] = std::minmax_element(parts[p].layer_seconds.begin(), parts[p].layer_seconds.end());
    absl::PrintF(" %9.2f %7.2f %s", *fastest * 1e3, *slowest * 1e3, p < 2 ? "|" : "\n");
  }
}

// The best of two measurements, one before and one after the engine's runs:
// the machine's memory is shared with whatever else runs, so one figure taken
// at a quiet moment is the ceiling the engine is held to.
MemoryBandwidth Best(const MemoryBandwidth& a, const MemoryBandwidth& b) {
  MemoryBandwidth best = a;
  best.copy_bytes_per_s = std::max(a.copy_bytes_per_s, b.copy_bytes_per_s);
  best.read_bytes_per_s = std::max(a.read_bytes_per_s, b.read_bytes_per_s);
  return best;
}

MemoryBandwidth MeasureBandwidth(const Flags& f) {
  cpu::ThreadPool pool(f.threads);
  return MeasureMemoryBandwidth(pool, static_cast<uint64_t>(f.bandwidth_mib) << 20, f.bandwidth_reps);
}

absl::Status BenchModel(const Flags& f, const std::string& dir) {
  // Memory first, while the model is not yet holding memory of its own.
  const MemoryBandwidth bw_before = MeasureBandwidth(f);

  ModelOptions options;
  options.n_threads = f.threads;
  options.allow_simd = !f.portable;
  const Clock::time_point open_start = Clock::now();
  OCTO_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Open(dir, options));
  const double open_s = SecondsSince(open_start);
  const ModelConfig& c = model->config();
  const WeightBytes bytes = WeightBytesPerToken(model->manifest());
  const int threads = model->exec().pool->size();

  absl::PrintF("\n== engine benchmark: %s ==\n", dir);
  absl::PrintF("model     %s: %s, %u layers, dim %u, hidden %u, heads %u/%u, vocab %u (opened in %.1f s)\n", c.name,
               c.architecture, c.n_layers, c.dim, c.hidden_dim, c.n_heads, c.n_kv_heads, c.vocab_size, open_s);
  std::string mix;
  for (const auto& [type, b] : bytes.matrix_bytes_by_type) {
    absl::StrAppendFormat(&mix, "%s%s %.3f GB", mix.empty() ? "" : ", ", type, Gb(b));
  }
  absl::PrintF("matrices  %s\n", mix);
  absl::PrintF("engine    %d threads, SIMD %s\n", threads, cpu::SimdName(model->exec().simd));
  absl::PrintF(
      "weights   %.3f GB read per decoded token (layers %.3f + lm_head %.3f + norms, one embedding row %.4f)\n",
      Gb(bytes.total()), Gb(bytes.layers), Gb(bytes.lm_head), Gb(bytes.other));
  std::fflush(stdout);

  // Warm-up: the first pass sizes the activations and faults in the pages.
  OCTO_RETURN_IF_ERROR(DecodeRate(*model, 1, f.prompt_tokens, 1).status());
  const double load_before = LoadAverage();
  const double cpu_before = ProcessCpuSeconds();
  const Clock::time_point runs_start = Clock::now();
  EngineRates rates;
  OCTO_ASSIGN_OR_RETURN(rates.decode1,
                        MedianOf(f.reps, [&] { return DecodeRate(*model, 1, f.prompt_tokens, f.decode_tokens); }));
  for (int batch : f.batches) {
    OCTO_ASSIGN_OR_RETURN(const Rate rate, MedianOf(f.reps, [&] {
                            return DecodeRate(*model, batch, f.prompt_tokens, f.decode_tokens);
                          }));
    rates.decode_batch.push_back(rate);
  }
  OCTO_ASSIGN_OR_RETURN(rates.prefill, MedianOf(f.prefill_reps, [&] { return PrefillRate(*model, f.prefill_tokens); }));
  const double cpu_share = (ProcessCpuSeconds() - cpu_before) / (SecondsSince(runs_start) * threads);
  const double load_after = LoadAverage();
  const MemoryBandwidth bw_after = MeasureBandwidth(f);
  const MemoryBandwidth bw = Best(bw_before, bw_after);

  // The bound: bytes copied per second by memcpy, i.e. each byte counted
  // once although memcpy reads and writes it. Decoding only reads, and here
  // a read-only stream runs faster than memcpy's bytes-copied rate but far
  // slower than its read + write traffic, so the 2x figure would be a bound
  // no read could reach. Both others are printed beside it.
  const double bound = bw.copy_bytes_per_s / bytes.total();
  const double read_bound = bw.read_bytes_per_s / bytes.total();
  const double rw_bound = 2 * bw.copy_bytes_per_s / bytes.total();
  absl::PrintF(
      "memory    memcpy %.2f GB/s copied (before the runs %.2f, after %.2f; best of %d each, %d MiB, %d threads)\n",
      Gb(bw.copy_bytes_per_s), Gb(bw_before.copy_bytes_per_s), Gb(bw_after.copy_bytes_per_s), bw.reps,
      static_cast<int>(bw.buffer_bytes >> 20), bw.threads);
  absl::PrintF("          read-only scan %.2f GB/s (before %.2f, after %.2f)\n", Gb(bw.read_bytes_per_s),
               Gb(bw_before.read_bytes_per_s), Gb(bw_after.read_bytes_per_s));
  absl::PrintF("bound     %.2f GB/s memcpy (bytes copied) / %.3f GB per token = %.1f tok/s\n", Gb(bw.copy_bytes_per_s),
               Gb(bytes.total()), bound);

  // "by CPU": the rate per CPU second the engine got (Rate), beside the
  // wall-clock one the ratios use.
  const double ratio = rates.decode1.wall / bound;
  absl::PrintF("\n  %-38s %12s %9s %14s %7s %8s\n", "", "measured", "by CPU", "bound", "ratio", "target");
  absl::PrintF("  %-38s %8.2f tok/s %9.2f %8.1f tok/s %7.2f  >= %.2f  %s\n",
               absl::StrFormat("decode batch 1 (%d tok, median of %d)", f.decode_tokens, f.reps), rates.decode1.wall,
               rates.decode1.cpu, bound, ratio, f.target, ratio >= f.target ? "OK" : "BELOW");
  absl::PrintF("  %-38s %24s %8.1f tok/s %7.2f\n", "  against the read-only scan", "", read_bound,
               rates.decode1.wall / read_bound);
  absl::PrintF("  %-38s %24s %8.1f tok/s %7.2f\n", "  against memcpy read + write (2x)", "", rw_bound,
               rates.decode1.wall / rw_bound);
  // A batch reads the weights once per pass: its bound is batch x that of
  // one. "x b1": the aggregate rate over batch 1's (by CPU time beside it).
  for (size_t i = 0; i < f.batches.size(); ++i) {
    const int batch = f.batches[i];
    const Rate& rate = rates.decode_batch[i];
    absl::PrintF("  %-38s %8.2f tok/s %9.2f %8.1f tok/s %7.2f  %5.2fx b1 (by CPU %.2fx)\n",
                 absl::StrFormat("decode batch %d (aggregate)", batch), rate.wall, rate.cpu, bound * batch,
                 rate.wall / (bound * batch), rate.wall / rates.decode1.wall, rate.cpu / rates.decode1.cpu);
  }
  absl::PrintF("  %-38s %8.2f tok/s %9.2f   (%.1f GFLOP/s in the matrices, %.1f by CPU)\n",
               absl::StrFormat("prefill %d tokens (median of %d)", f.prefill_tokens, f.prefill_reps),
               rates.prefill.wall, rates.prefill.cpu, 2.0 * bytes.matmul_elements * rates.prefill.wall / 1e9,
               2.0 * bytes.matmul_elements * rates.prefill.cpu / 1e9);
  // With every pool thread busy a quiet machine gives close to 100%; much
  // less means other processes had the cores (or the pass ran serially).
  absl::PrintF(
      "  machine: load average %.2f before, %.2f after (%u cores); the engine used %.0f%% of %d threads' "
      "time%s\n",
      load_before, load_after, std::thread::hardware_concurrency(), 100 * cpu_share, threads,
      std::max(load_before, load_after) > 1.5 * threads ? "  -- BUSY MACHINE: figures understate the engine" : "");
  std::fflush(stdout);

  if (!f.breakdown) return absl::OkStatus();
  if (c.n_experts > 0) {
    absl::PrintF("\n(no MatMul breakdown: it covers dense models only)\n");
    return absl::OkStatus();
  }
  // The engine's pass on a store of its own (the model's freed first: the
  // same weights, resident), so the MatMuls can be timed on them too.
  const cpu::Simd simd = model->exec().simd;
  model.reset();
  OCTO_ASSIGN_OR_RETURN(std::unique_ptr<WeightStore> store, WeightStore::Open(dir, WeightStoreOptions{}));
  cpu::ThreadPool pool(f.threads);
  const cpu::Exec exec{.pool = &pool, .simd = simd};
  std::vector<PassBreakdown> parts(3);
  OCTO_ASSIGN_OR_RETURN(parts[0], BreakDownPass(*store, exec, 1, 1, f.prompt_tokens, f.reps));
  OCTO_ASSIGN_OR_RETURN(parts[1], BreakDownPass(*store, exec, BreakdownBatch(f), 1, f.prompt_tokens, f.reps));
  OCTO_ASSIGN_OR_RETURN(parts[2], BreakDownPass(*store, exec, 1, f.prefill_tokens, 0, f.prefill_reps));
  PrintBreakdown(f, parts);
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace
}  // namespace octo::bench

int main(int argc, char** argv) {
  octo::bench::Flags f;
  CLI::App app{"Measures the CPU engine's decode and prefill rates against the memory-bandwidth bound."};
  app.add_option("model_dirs", f.model_dirs, "layer directories (made by octo-ctl decompose)")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--threads", f.threads, "engine threads (0: one per core)")->capture_default_str();
  app.add_flag("--portable", f.portable, "use the portable kernels even where AVX2 is available");
  app.add_option("--reps", f.reps, "runs per decode figure (median)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--decode-tokens", f.decode_tokens, "tokens per decode run")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--prompt-tokens", f.prompt_tokens, "prompt prefilled before each decode run")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", f.batches, "sequences per pass for the batched decode, comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--prefill-tokens", f.prefill_tokens, "prompt length for the prefill figure")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--prefill-reps", f.prefill_reps, "runs for the prefill figure (median)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--bandwidth-mib", f.bandwidth_mib, "size of each memcpy buffer")
      ->capture_default_str()
      ->check(CLI::Range(64, 16384));
  app.add_option("--bandwidth-reps", f.bandwidth_reps, "memcpy / scan passes (best)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--target", f.target, "batch-1 decode / bound to call OK")->capture_default_str();
  app.add_flag("!--no-breakdown", f.breakdown, "skip the per-matrix MatMul timing");
  CLI11_PARSE(app, argc, argv);

  int failures = 0;
  for (const std::string& dir : f.model_dirs) {
    const absl::Status status = octo::bench::BenchModel(f, dir);
    if (!status.ok()) {
      std::fprintf(stderr, "engine_bench: %s: %s\n", dir.c_str(), status.ToString().c_str());
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}
