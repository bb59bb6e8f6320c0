// kv_bench: what a quantized KV cache buys on one model directory, on the
// CPU, all measured in the same run.
//
//   kv_bench [--threads N] [--kv-budget SIZE] [--context C] [--tokens T]
//            [--types f16,q8_0,q4_0] MODEL_DIR
//
// For each cache type (keys and values alike):
//   1. the bytes one position takes over every layer, and the longest
//      context a --kv-budget holds (uncapped, and capped at the model's
//      trained context), with its multiple of f16's;
//   2. decode tokens/s at a C-position context: the cache is filled with C
//      rows of synthetic keys and values (KvAppend of random rows: what a
//      prefill would leave, without the hours a CPU prefill of 8K tokens
//      takes on an 8B model; attention's cost does not depend on the
//      values), then T single-token passes are timed, median;
//   3. the bytes one such token reads, weights plus the cache's C rows, and
//      the bound memcpy bandwidth sets on the rate (engine_bench.cc explains
//      the bound), with decode / bound.
// Not a test: nothing is asserted.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "daemon/engine/model.h"
#include "storage/byte_size.h"
#include "storage/status_macros.h"
#include "tests/bench/memory_bandwidth.h"
#include "tests/bench/weight_bytes.h"

namespace octo::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  std::string model_dir;
  int threads = 0;
  std::string kv_budget = "4GiB";
  int context = 8192;
  int tokens = 4;
  std::string types = "f16,q8_0,q4_0";
};

// Fills positions [0, n) of every layer of `kv` with random rows, as a
// prefill of n tokens would have left them, and commits them.
absl::Status FillSynthetic(Model& model, KvCache& kv, int n) {
  const ModelConfig& c = model.config();
  const int kv_dim = static_cast<int>(c.n_kv_heads * c.head_dim);
  constexpr int kChunk = 256;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> k(static_cast<size_t>(kChunk) * kv_dim), v(k.size());
  OCTO_RETURN_IF_ERROR(kv.Reserve(n + 1));
  for (uint32_t layer = 0; layer < c.n_layers; ++layer) {
    for (int first = 0; first < n; first += kChunk) {
      const int rows = std::min(kChunk, n - first);
      for (float& x : k) x = dist(rng);
      for (float& x : v) x = dist(rng);
      OCTO_RETURN_IF_ERROR(model.backend().KvAppend(k.data(), v.data(), rows, kv_dim, kv.keys(static_cast<int>(layer)),
                                                    kv.values(static_cast<int>(layer)), first, kv.types()));
    }
  }
  kv.Commit(n);
  return absl::OkStatus();
}

int Run(const Flags& flags) {
  const std::optional<uint64_t> budget = ParseByteSize(flags.kv_budget);
  if (!budget.has_value()) {
    std::fprintf(stderr, "--kv-budget: '%s' is not a size\n", flags.kv_budget.c_str());
    return 2;
  }
  std::vector<GgmlType> types;
  for (absl::string_view name : absl::StrSplit(flags.types, ',')) {
    absl::StatusOr<GgmlType> type = ParseKvCacheType("--types", name);
    if (!type.ok()) {
      std::fprintf(stderr, "%s\n", std::string(type.status().message()).c_str());
      return 2;
    }
    types.push_back(*type);
  }
  ModelOptions options;
  options.n_threads = flags.threads;
  absl::StatusOr<std::unique_ptr<Model>> base = Model::Open(flags.model_dir, options);
  if (!base.ok()) {
    std::fprintf(stderr, "%s: %s\n", flags.model_dir.c_str(), std::string(base.status().message()).c_str());
    return 1;
  }
  const int threads = (*base)->exec().pool->size();
  const ModelConfig c = (*base)->config();  // a copy: base closes below
  const WeightBytes weights = WeightBytesPerToken((*base)->manifest());
  const MemoryBandwidth bandwidth = MeasureMemoryBandwidth(*(*base)->exec().pool, 512ull << 20, 5);
  base->reset();
  const int context = std::min<int>(flags.context, static_cast<int>(c.context_length) - flags.tokens);
  std::printf("model %s: %u layers, %u kv heads of %u, trained context %u; %d threads\n", flags.model_dir.c_str(),
              c.n_layers, c.n_kv_heads, c.head_dim, c.context_length, threads);
  std::printf("memcpy %.2f GB/s; weights %s per token; KV budget %s; decode at a %d-position context\n",
              bandwidth.copy_bytes_per_s / 1e9, FormatByteSize(weights.total()).c_str(),
              FormatByteSize(*budget).c_str(), context);
  uint64_t f16_positions = 0;
  for (GgmlType type : types) {
    options.kv_types = {type, type};
    absl::StatusOr<std::unique_ptr<Model>> model = Model::Open(flags.model_dir, options);
    if (!model.ok()) {
      std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
      return 1;
    }
    const uint64_t per_position = (*model)->NewCache(1)->PositionBytes();
    const uint64_t positions = *budget / per_position;
    if (type == GgmlType::kF16) f16_positions = positions;
    std::unique_ptr<KvCache> kv = (*model)->NewCache(context + flags.tokens);
    absl::Status filled = FillSynthetic(**model, *kv, context);
    if (!filled.ok()) {
      std::fprintf(stderr, "filling the cache: %s\n", std::string(filled.message()).c_str());
      return 1;
    }
    std::vector<double> seconds;
    std::vector<float> logits;
    for (int t = 0; t < flags.tokens; ++t) {
      const std::vector<int32_t> token = {static_cast<int32_t>((1 + 7919 * t) % c.vocab_size)};
      const SequenceStep step{.kv = kv.get(), .tokens = token};
      const Clock::time_point start = Clock::now();
      absl::Status pass = (*model)->Forward(std::span<const SequenceStep>(&step, 1), logits);
      seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      if (!pass.ok()) {
        std::fprintf(stderr, "decode: %s\n", std::string(pass.message()).c_str());
        return 1;
      }
    }
    std::sort(seconds.begin(), seconds.end());
    const double rate = 1.0 / seconds[seconds.size() / 2];
    const uint64_t token_bytes = weights.total() + per_position * static_cast<uint64_t>(context);
    const double bound = bandwidth.copy_bytes_per_s / token_bytes;
    std::printf(
        "kv %-5s %7s per position: budget holds %8llu positions (%5.2f x f16; %llu within the trained context) | "
        "decode at %d: %6.3f tokens/s, %s per token (cache %s), bound %6.3f tokens/s, %.2f of it\n",
        std::string(KvCacheTypeName(type)).c_str(), FormatByteSize(per_position).c_str(),
        static_cast<unsigned long long>(positions),
        f16_positions > 0 ? static_cast<double>(positions) / f16_positions : 0.0,
        static_cast<unsigned long long>(std::min<uint64_t>(positions, c.context_length)), context, rate,
        FormatByteSize(token_bytes).c_str(), FormatByteSize(per_position * context).c_str(), bound, rate / bound);
  }
  return 0;
}

}  // namespace
}  // namespace octo::bench

int main(int argc, char** argv) {
  octo::bench::Flags flags;
  CLI::App app("The KV cache's types on one model: the context a budget holds, and decode at a long context");
  app.add_option("model", flags.model_dir, "Model directory")->required();
  app.add_option("-t,--threads", flags.threads, "Threads (0: one per core)");
  app.add_option("--kv-budget", flags.kv_budget, "The KV budget the positions are counted in");
  app.add_option("--context", flags.context, "Positions in the cache when decoding")->check(CLI::Range(1, 1 << 20));
  app.add_option("--tokens", flags.tokens, "Decode passes timed per type (median)")->check(CLI::Range(1, 1000));
  app.add_option("--types", flags.types, "Cache types, comma-separated");
  CLI11_PARSE(app, argc, argv);
  return octo::bench::Run(flags);
}
