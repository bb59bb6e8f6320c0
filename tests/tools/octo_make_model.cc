// octo-make-model: writes a GGUF model of a real (or tiny) shape, in any
// supported type, with valid random weights and a working tokenizer; or,
// with --widen-from, a model of a preset's shape that computes a small
// generated llama's function (a speculative-decoding target for that draft;
// tests/tools/widen_model.h).
//
//   octo-make-model --preset llama-3-8b --type Q4_K_M -o /data/l8b.gguf
//   octo-make-model --preset tiny --type Q8_0 --layers 4 -o /tmp/tiny.gguf
//   octo-make-model --preset llama-3.2-1b --layers 4 --widen-from /tmp/small.gguf -o /tmp/wide.gguf
//     (small.gguf: a generated llama of dim 512 or 128, heads 4n/n x 64, ffn <= 8192, <= 4 layers)
//   octo-make-model --list-presets
//
// The file is streamed (memory stays at a few MiB whatever the model size,
// plus the small model when widening) and appears under its name only once
// complete. Exit status: 0 on success, 1 when generation fails, 2 on bad
// flags or a model that cannot be widened (CLI11's own codes for parse errors).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "CLI/CLI.hpp"
#include "client/command_line.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tests/tools/model_presets.h"
#include "tests/tools/model_tensors.h"
#include "tests/tools/widen_model.h"

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
  std::string widen_from;  // a small generated llama GGUF: widen it to the preset's shape
  float extra_layer_norm = 0;
};

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void ListPresets() {
  std::printf("presets:\n");
  for (const ModelShape& shape : AllPresets()) std::printf("  %s\n", DescribeShape(shape).c_str());
  std::printf("types: %s\n", absl::StrJoin(AllTypeRecipeNames(), ", ").c_str());
}

std::string Mb(uint64_t bytes) { return absl::StrFormat("%.1f MB", static_cast<double>(bytes) / 1e6); }

// Progress lines on stderr for a write that began at `start`: at most one per
// kProgressIntervalSeconds, and one when the last byte is written.
WriteProgress ProgressPrinter(Clock::time_point start) {
  return [start, last_report = start, reported_total = false](uint64_t written, uint64_t total) mutable {
    if (written == total ? reported_total : SecondsSince(last_report) < kProgressIntervalSeconds) return;
    reported_total = written == total;
    last_report = Clock::now();
    const double elapsed = SecondsSince(start);
    std::fprintf(stderr, "  %s / %s (%.0f%%), %.0f MB/s\n", Mb(written).c_str(), Mb(total).c_str(),
                 100.0 * static_cast<double>(written) / static_cast<double>(total),
                 elapsed > 0 ? static_cast<double>(written) / 1e6 / elapsed : 0.0);
  };
}

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

  const Clock::time_point start = Clock::now();
  if (absl::Status status = WriteModel(*plan, flags.output, flags.seed, ProgressPrinter(start)); !status.ok()) {
    std::fprintf(stderr, "octo-make-model: %s\n", status.ToString().c_str());
    return 1;
  }
  const double elapsed = SecondsSince(start);
  std::printf("wrote %s: %llu bytes in %.2f s (%.0f MB/s)\n", flags.output.c_str(),
              static_cast<unsigned long long>(*file_size), elapsed,
              static_cast<double>(*file_size) / 1e6 / elapsed);
  return 0;
}

// --widen-from: the preset gives the wide sizes (its vocabulary and tokenizer
// are ignored: they come from the small file, as do types and context).
int RunWiden(const Flags& flags) {
  ShapeOverrides layers_only;
  layers_only.n_layers = flags.overrides.n_layers;
  absl::StatusOr<ModelShape> shape = FindPreset(flags.preset);
  if (shape.ok()) shape = ApplyOverrides(*std::move(shape), layers_only);
  if (shape.ok() && (shape->architecture != "llama" || shape->n_experts > 0)) {
    shape = absl::InvalidArgumentError(absl::StrCat("--widen-from: preset ", shape->name, " is ",
                                                    shape->n_experts > 0 ? "a mixture of experts" : shape->architecture,
                                                    "; only dense llama presets give a wide shape"));
  }
  if (!shape.ok()) {
    std::fprintf(stderr, "octo-make-model: %s\n", shape.status().ToString().c_str());
    return 2;
  }
  const WidenOptions options{.dim = shape->dim,
                             .hidden_dim = shape->hidden_dim,
                             .n_layers = shape->n_layers,
                             .n_heads = shape->n_heads,
                             .n_kv_heads = shape->n_kv_heads,
                             .head_dim = shape->head_dim,
                             .vocab_size = flags.overrides.vocab_size.value_or(0),
                             .extra_layer_norm = flags.extra_layer_norm,
                             .name = shape->name};
  std::printf("widening %s to %s: dim %u, ffn %u, %u layers, heads %u/%u x %u, extra layer norm %g, seed %llu\n",
              flags.widen_from.c_str(), shape->name.c_str(), options.dim, options.hidden_dim, options.n_layers,
              options.n_heads, options.n_kv_heads, options.head_dim, options.extra_layer_norm,
              static_cast<unsigned long long>(flags.seed));
  std::fflush(stdout);

  const Clock::time_point start = Clock::now();
  const absl::Status status = WidenModel(flags.widen_from, options, flags.output, flags.seed, ProgressPrinter(start));
  if (!status.ok()) {
    std::fprintf(stderr, "octo-make-model: %s\n", status.ToString().c_str());
    return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  const double elapsed = SecondsSince(start);
  std::error_code ec;
  uint64_t file_size = std::filesystem::file_size(flags.output, ec);
  if (ec) file_size = 0;  // written and renamed, then gone: report no size
  std::printf("wrote %s: %llu bytes in %.2f s (%.0f MB/s)\n", flags.output.c_str(),
              static_cast<unsigned long long>(file_size), elapsed, static_cast<double>(file_size) / 1e6 / elapsed);
  return 0;
}

}  // namespace
}  // namespace octo::testing

int main(int argc, char** argv) {
  using octo::testing::Flags;
  CLI::App app{"Writes a GGUF model of a real shape with valid random weights and a working tokenizer."};
  octo::UseOctoConventions(app, "octo-make-model");
  Flags flags;
  bool list_presets = false;
  uint32_t layers = 0, vocab = 0, ctx = 0;
  app.add_option("--preset", flags.preset, "model shape (see --list-presets)");
  app.add_option("--type", flags.type,
                 "weight type: F32, F16, BF16, Q8_0, ..., IQ4_XS or Q4_K_M (not with --widen-from)");
  app.add_option("-o,--output", flags.output, "output .gguf path");
  CLI::Option* layers_opt = app.add_option("--layers", layers, "override the layer count")->check(CLI::PositiveNumber);
  CLI::Option* vocab_opt = app.add_option("--vocab", vocab, "override the vocabulary size")->check(CLI::PositiveNumber);
  CLI::Option* ctx_opt = app.add_option("--ctx", ctx, "override the context length (not with --widen-from)")
                            ->check(CLI::PositiveNumber);
  app.add_option("--seed", flags.seed, "random seed (same seed, same bytes)");
  CLI::Option* alignment_opt =
      app.add_option("--alignment", flags.alignment, "GGUF data alignment (power of two; not with --widen-from)");
  app.add_option("--widen-from", flags.widen_from,
                 "SMALL.gguf, a dense llama octo-make-model wrote: write the --preset's sizes (dim, ffn, layers, "
                 "heads; --layers applies) computing its function. Types, vocabulary, tokenizer, context and "
                 "alignment come from SMALL.gguf; --vocab, if given, must match it");
  app.add_option("--extra-layer-norm", flags.extra_layer_norm,
                 "with --widen-from: the RMSNorm weights of the layers past the small model's (default 0: they add "
                 "nothing; on generated models 0.01-0.05 move the logits by ~2-20% of their range)");
  app.add_flag("--list-presets", list_presets, "print the presets and types, then exit");
  if (const std::optional<int> exit_code = octo::ParseCommandLine(app, argc, argv)) return *exit_code;

  if (list_presets) {
    octo::testing::ListPresets();
    return 0;
  }
  if (!flags.widen_from.empty()) {
    if (flags.preset.empty() || flags.output.empty() || !flags.type.empty() || ctx_opt->count() > 0 ||
        alignment_opt->count() > 0) {
      std::fprintf(stderr,
                   "octo-make-model: --widen-from needs --preset and -o, and takes no --type, --ctx or --alignment "
                   "(they come from the small model)\n%s",
                   app.help().c_str());
      return 2;
    }
    if (layers_opt->count() > 0) flags.overrides.n_layers = layers;
    if (vocab_opt->count() > 0) flags.overrides.vocab_size = vocab;
    return octo::testing::RunWiden(flags);
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
