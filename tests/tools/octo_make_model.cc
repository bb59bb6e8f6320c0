// octo-make-model: writes a GGUF model of a real (or tiny) shape, in any
// supported type, with valid random weights and a working tokenizer.
//
//   octo-make-model --preset llama-3-8b --type Q4_K_M -o /data/l8b.gguf
//   octo-make-model --preset tiny --type Q8_0 --layers 4 -o /tmp/tiny.gguf
//   octo-make-model --list-presets
//
// The file is streamed (memory stays at a few MiB whatever the model size)
// and appears under its name only once complete. Exit status: 0 on success,
// 1 when generation fails, 2 on bad flags (CLI11's own codes for parse errors).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tests/tools/model_presets.h"
#include "tests/tools/model_tensors.h"

namespace octo::testing {
namespace {

constexpr double kProgressIntervalSeconds = 1.0;

struct Flags {
  std::string preset;
  std::string type;
  std::string output;
  ShapeOverrides overrides;
  uint64_t seed = 1;
  uint32_t alignment = kGgufDefaultAlignment;
};

void ListPresets() {
  std::printf("presets:\n");
  for (const ModelShape& shape : AllPresets()) std::printf("  %s\n", DescribeShape(shape).c_str());
  std::printf("types: %s\n", absl::StrJoin(AllTypeRecipeNames(), ", ").c_str());
}

std::string Mb(uint64_t bytes) { return absl::StrFormat("%.1f MB", static_cast<double>(bytes) / 1e6); }

int Run(const Flags& flags) {
  absl::StatusOr<ModelShape> shape = FindPreset(flags.preset);
  if (shape.ok()) shape = ApplyOverrides(*std::move(shape), flags.overrides);
  absl::StatusOr<TypeRecipe> recipe = ParseTypeRecipe(flags.type);
  absl::StatusOr<ModelPlan> plan = absl::InternalError("not planned");
  if (shape.ok() && recipe.ok()) plan = PlanModel(*shape, *recipe, flags.alignment);
  for (const absl::Status& status : {shape.status(), recipe.status(), plan.status()}) {
    if (!status.ok()) {
      std::fprintf(stderr, "octo-make-model: %s\n", status.ToString().c_str());
      return 2;
    }
  }
  absl::StatusOr<uint64_t> file_size = plan->writer.FileSize();
  if (!file_size.ok()) {
    std::fprintf(stderr, "octo-make-model: %s\n", file_size.status().ToString().c_str());
    return 2;
  }
  std::printf("%s\n", DescribeShape(*shape).c_str());
  std::printf("type %s: %zu tensors, %llu bytes (%s), alignment %u, seed %llu\n", recipe->name.c_str(),
              plan->tensors.size(), static_cast<unsigned long long>(*file_size), Mb(*file_size).c_str(),
              flags.alignment, static_cast<unsigned long long>(flags.seed));
  std::fflush(stdout);

  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  Clock::time_point last_report = start;
  const auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  bool reported_total = false;
  auto progress = [&](uint64_t written, uint64_t total) {
    if (written == total ? reported_total : seconds_since(last_report) < kProgressIntervalSeconds) return;
    reported_total = written == total;
    last_report = Clock::now();
    const double elapsed = seconds_since(start);
    std::fprintf(stderr, "  %s / %s (%.0f%%), %.0f MB/s\n", Mb(written).c_str(), Mb(total).c_str(),
                 100.0 * static_cast<double>(written) / static_cast<double>(total),
                 elapsed > 0 ? static_cast<double>(written) / 1e6 / elapsed : 0.0);
  };
  if (absl::Status status = WriteModel(*plan, flags.output, flags.seed, progress); !status.ok()) {
    std::fprintf(stderr, "octo-make-model: %s\n", status.ToString().c_str());
    return 1;
  }
  const double elapsed = seconds_since(start);
  std::printf("wrote %s: %llu bytes in %.2f s (%.0f MB/s)\n", flags.output.c_str(),
              static_cast<unsigned long long>(*file_size), elapsed,
              static_cast<double>(*file_size) / 1e6 / elapsed);
  return 0;
}

}  // namespace
}  // namespace octo::testing

int main(int argc, char** argv) {
  using octo::testing::Flags;
  CLI::App app{"Writes a GGUF model of a real shape with valid random weights and a working tokenizer."};
  Flags flags;
  bool list_presets = false;
  uint32_t layers = 0, vocab = 0, ctx = 0;
  app.add_option("--preset", flags.preset, "model shape (see --list-presets)");
  app.add_option("--type", flags.type, "weight type: F32, F16, BF16, Q8_0, ..., IQ4_XS or Q4_K_M");
  app.add_option("-o,--output", flags.output, "output .gguf path");
  CLI::Option* layers_opt = app.add_option("--layers", layers, "override the layer count")->check(CLI::PositiveNumber);
  CLI::Option* vocab_opt = app.add_option("--vocab", vocab, "override the vocabulary size")->check(CLI::PositiveNumber);
  CLI::Option* ctx_opt = app.add_option("--ctx", ctx, "override the context length")->check(CLI::PositiveNumber);
  app.add_option("--seed", flags.seed, "random seed (same seed, same bytes)");
  app.add_option("--alignment", flags.alignment, "GGUF data alignment (power of two)");
  app.add_flag("--list-presets", list_presets, "print the presets and types, then exit");
  CLI11_PARSE(app, argc, argv);

  if (list_presets) {
    octo::testing::ListPresets();
    return 0;
  }
  if (flags.preset.empty() || flags.type.empty() || flags.output.empty()) {
    std::fprintf(stderr, "octo-make-model: --preset, --type and -o are required (or --list-presets)\n%s",
                 app.help().c_str());
    return 2;
  }
  if (layers_opt->count() > 0) flags.overrides.n_layers = layers;
  if (vocab_opt->count() > 0) flags.overrides.vocab_size = vocab;
  if (ctx_opt->count() > 0) flags.overrides.context_length = ctx;
  return octo::testing::Run(flags);
}
