// loader_bench: how fast layers stream through LayerStream (octo-loader ->
// shared-memory ring -> the caller), next to what `dd` reads from the same
// files with O_DIRECT, measured in the same run.
//
//   loader_bench [--passes N] [--slots S] [--queue-depth Q] [--chunk-kib K]
//                [--work DIR] [--loader PATH] [MODEL_DIR]
//
// MODEL_DIR: a layer directory. Without one, a Llama-3.2-1B-shaped Q4_K_M
// model (random weights, real sizes) is generated and decomposed into
// WORK/llama-3.2-1b-Q4_K_M once and reused (WORK defaults to
// ./loader-bench; about 0.8 GB, the GGUF is deleted once decomposed).
//
// Each pass streams every layer file once:
//   dd:     `dd if=FILE of=/dev/null bs=4M iflag=direct` per file; the rate
//           is the bytes over the sum of the times dd itself reports, so
//           process start-up is not counted against dd;
//   loader: SetOrder, then Acquire + Release of every layer in order,
//           through a LayerStream started just before the pass (outside
//           the timing); the rate is the bytes over the wall time, as a
//           forward pass with no compute would see it. "its reads alone":
//           the loader's own read + checksum time per byte.
// Passes alternate dd, loader, dd, loader, ... so drift in the disk's rate
// hits both alike; medians are compared. Both read with O_DIRECT, so the
// page cache plays no part (it is also dropped before each pass when run
// as root). Not a test: nothing is asserted.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "daemon/loader/layer_stream.h"
#include "storage/decompose.h"
#include "storage/manifest.h"
#include "tests/tools/model_presets.h"
#include "tests/tools/model_tensors.h"

namespace octo {
namespace {

namespace fs = std::filesystem;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void DropPageCache() {
  ::sync();
  if (FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w")) {
    std::fputs("1", f);
    std::fclose(f);
  }
}

absl::Status GenerateModel(const std::string& dir) {
  using namespace ::octo::testing;
  const std::string gguf = dir + ".gguf";
  std::fprintf(stderr, "generating %s ...\n", dir.c_str());
  absl::StatusOr<ModelShape> shape = FindPreset("llama-3.2-1b");
  if (!shape.ok()) return shape.status();
  absl::StatusOr<TypeRecipe> recipe = ParseTypeRecipe("Q4_K_M");
  if (!recipe.ok()) return recipe.status();
  absl::StatusOr<ModelPlan> plan = PlanModel(*shape, *recipe);
  if (!plan.ok()) return plan.status();
  if (absl::Status s = WriteModel(*plan, gguf, /*seed=*/1); !s.ok()) return s;
  absl::StatusOr<Manifest> manifest = Decompose(gguf, dir, {});
  fs::remove(gguf);
  return manifest.status();
}

// Seconds dd reports for reading `path` with O_DIRECT; < 0 on failure.
double DdSeconds(const std::string& path) {
  const std::string command = "dd if='" + path + "' of=/dev/null bs=4M iflag=direct 2>&1";
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return -1;
  char line[512];
  double seconds = -1;
  while (std::fgets(line, sizeof(line), p) != nullptr) {
    // "N bytes (...) copied, 0.0123 s, 3.1 GB/s"
    if (const char* copied = std::strstr(line, "copied, ")) seconds = std::atof(copied + 8);
  }
  return ::pclose(p) == 0 ? seconds : -1;
}

int Run(int argc, char** argv) {
  std::string model_dir, work = "loader-bench", loader;
  int passes = 5;
  uint32_t slots = 2, queue_depth = 8, chunk_kib = 1024;
  CLI::App app{"loader_bench: LayerStream's read rate next to dd's over the same files"};
  app.add_option("model_dir", model_dir, "layer directory (default: generate Llama-3.2-1B Q4_K_M)");
  app.add_option("--passes", passes, "passes of each kind")->check(CLI::Range(1, 100));
  app.add_option("--slots", slots, "ring slots");
  app.add_option("--queue-depth", queue_depth, "loader reads in flight per file");
  app.add_option("--chunk-kib", chunk_kib, "loader bytes per read, KiB");
  app.add_option("--work", work, "where the generated model is kept");
  app.add_option("--loader", loader, "octo-loader executable (default: beside this one)");
  CLI11_PARSE(app, argc, argv);
  if (loader.empty()) loader = (fs::read_symlink("/proc/self/exe").parent_path() / "octo-loader").string();

  if (model_dir.empty()) {
    model_dir = work + "/llama-3.2-1b-Q4_K_M";
    if (!fs::exists(model_dir + "/manifest.json")) {
      fs::create_directories(work);
      if (absl::Status s = GenerateModel(model_dir); !s.ok()) {
        std::fprintf(stderr, "loader_bench: %s\n", s.ToString().c_str());
        return 1;
      }
    }
  }
  absl::StatusOr<Manifest> manifest = ReadManifest(model_dir);
  if (!manifest.ok()) {
    std::fprintf(stderr, "loader_bench: %s\n", manifest.status().ToString().c_str());
    return 1;
  }
  std::vector<uint32_t> order;
  uint64_t pass_bytes = 0, largest = 0;
  for (uint32_t l = 0; l < manifest->config.n_layers; ++l) {
    order.push_back(l);
    pass_bytes += manifest->Layer(l)->size;
    largest = std::max(largest, manifest->Layer(l)->size);
  }

  LayerStreamOptions options;
  options.loader_path = loader;
  options.model_dir = model_dir;
  options.slots = slots;
  options.slot_bytes = largest;
  options.queue_depth = queue_depth;
  options.loader_args = {"--chunk-kib", std::to_string(chunk_kib)};
  std::printf("model        %s: %zu layer files, %.1f MB per pass (largest %.1f MB)\n", model_dir.c_str(),
              order.size(), pass_bytes / 1e6, largest / 1e6);

  std::vector<double> dd_rates, loader_rates, loader_read_rates;
  uint32_t restarts = 0, checksum_failures = 0;
  for (int pass = 0; pass < passes; ++pass) {
    DropPageCache();
    double dd_seconds = 0;
    for (uint32_t l : order) {
      const double s = DdSeconds(model_dir + "/" + manifest->Layer(l)->name);
      if (s < 0) {
        std::fprintf(stderr, "loader_bench: dd failed on %s\n", manifest->Layer(l)->name.c_str());
        return 1;
      }
      dd_seconds += s;
    }
    dd_rates.push_back(pass_bytes / dd_seconds / 1e9);

    // A fresh stream per pass (started outside the timing): nothing read
    // ahead for the next pass overlaps the next dd.
    DropPageCache();
    absl::StatusOr<std::unique_ptr<LayerStream>> stream = LayerStream::Start(options);
    if (!stream.ok()) {
      std::fprintf(stderr, "loader_bench: %s\n", stream.status().ToString().c_str());
      return 1;
    }
    if (pass == 0) {
      std::printf("loader       %s, %u slots, queue depth %u, %u KiB reads, io mode %s\n", loader.c_str(), slots,
                  queue_depth, chunk_kib, (*stream)->stats().io_mode.c_str());
    }
    const auto start = std::chrono::steady_clock::now();
    (*stream)->SetOrder(order);
    for (uint32_t l : order) {
      absl::StatusOr<StreamedLayer> layer = (*stream)->Acquire(l);
      if (!layer.ok()) {
        std::fprintf(stderr, "loader_bench: layer %u: %s\n", l, layer.status().ToString().c_str());
        return 1;
      }
      (*stream)->Release(l);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const LoaderStats stats = (*stream)->stats();
    restarts += stats.restarts;
    checksum_failures += stats.checksum_failures;
    loader_rates.push_back(pass_bytes / seconds / 1e9);
    loader_read_rates.push_back(stats.bytes_read / stats.read_seconds / 1e9);
    std::printf("pass %d       dd %.2f GB/s   loader %.2f GB/s (its reads alone %.2f GB/s)\n", pass + 1,
                dd_rates.back(), loader_rates.back(), loader_read_rates.back());
  }
  const double dd = Median(dd_rates), ours = Median(loader_rates);
  std::printf("median       dd %.2f GB/s   loader %.2f GB/s (its reads alone %.2f GB/s)\n", dd, ours,
              Median(loader_read_rates));
  std::printf("ratio        loader / dd = %.2f (target >= 0.90)\n", ours / dd);
  std::printf("restarts     %u, checksum failures %u\n", restarts, checksum_failures);
  return 0;
}

}  // namespace
}  // namespace octo

int main(int argc, char** argv) { return octo::Run(argc, argv); }
