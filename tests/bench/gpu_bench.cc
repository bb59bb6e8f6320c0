// gpu_bench: the CUDA backend on one model directory, every figure printed
// next to the limit it is measured against, both taken in the same run.
//
//   gpu_bench --model DIR [--vram-budget BYTES] [--tokens N] [--prefill N] [--sessions 1,8,32]
//   gpu_bench --model DIR --accounting-only      (CI, on the host executor too)
//   gpu_bench --profile-models FEWER,MORE --profile-name NAME --full-layers N
//       the CUDA calls of a decode token (api_profile.h): one line
//
// 1. Limits, measured before any model takes device memory, best of
//    --copy-reps (a ceiling: the fastest the bus or memory was seen to go):
//      H2D  pinned cudaMemcpyAsync host -> device of a cudaMallocHost buffer
//           (--copy-mib): the copy limit of everything streamed;
//      HBM  cudaMemcpyAsync device -> device of a large buffer, bytes read +
//           written per second (the usual "memory bandwidth" figure: a
//           decode only reads, and a GPU reads about as fast as it copies).
// 2. The streamed model: Model::Open with the VRAM budget (layers kept on
//    the device + the staging buffers the others are copied through); every
//    layer in host RAM unless --host-budget (then some are read from disk
//    each pass and the disk, not H2D, is the limit). When the budget holds
//    the whole model (a small one, the executor's tiny), a budget that
//    keeps the first two and the last layer in VRAM and streams the rest
//    is used instead, and the report says so.
//      ACCOUNTING  over the model's first P passes (one prefill, P - 1
//           decode steps): DeviceStats().copied_bytes must be P x the bytes
//           of the layers not in VRAM (their file sizes), plus at most the
//           prefetch of pass P + 1 (what the staging buffers hold, never more
//           than one pass). After a drain, each layer's copy count must be 0
//           in VRAM and P or P + 1 streamed. Exit 1 when they disagree.
//      decode   --tokens steps of one session after a --prompt prefill:
//           tokens/s against H2D / streamed bytes per token (target 0.8);
//           the H2D rate the copies reached (copied bytes / their event time,
//           target 0.85 of pinned); overlap (below, target 0.9);
//      prefill  one pass of --prefill tokens, after one untimed;
//      sessions B in --sessions: B caches prefilled together, then passes
//           that advance all B by one token: aggregate tokens/s against B x
//           the decode bound (one pass's copies serve every session).
// 3. The resident model (every layer in VRAM): decode against HBM / weight
//    bytes per token (weight_bytes.h; target 0.5); prefill.
//
// Overlap: a pass runs copies (copy stream) beside compute (compute
// stream). When both are perfectly overlapped the pass takes as long as the
// busier of the two alone, so overlap = max(copy, compute) / wall, from the
// per-layer event sums. DeviceStats' wait (the compute stream's gaps before
// streamed layers) is printed too, as 1 - wait / copy: it is near 1 only
// when compute, not copying, bounds the pass; a copy-bound pass (a model
// larger than VRAM) waits on every copy by nature and reads near 0 there.
//
// The decode figures use the per-layer sums of DeviceStats (copies x file
// size, copy, wait and compute seconds), which come back from events two
// passes late; their differences over a run cover as many passes as the
// run, of the same shape (see Decode). Copied bytes and copy time come from
// the same read-back, so their ratio is exact.
//
// Exit status: 0; 1 when the accounting disagrees or a model cannot be
// opened or run; 2 when there is no CUDA device (CLI11's codes for bad
// flags). The other
// targets print OK / BELOW and are not asserted. In an OCTO_CUDA_SIM=ON
// build it runs on the host executor: the accounting holds there, the
// rates measure the executor, not a GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/engine/backend_setup.h"
#include "daemon/engine/cuda/cuda_backend.h"
#include "daemon/engine/model.h"
#include "daemon/engine/model_files.h"
#include "kernels/cuda/device.h"
#include "storage/manifest.h"
#include "storage/status_macros.h"
#include "tests/bench/api_profile.h"
#include "tests/bench/weight_bytes.h"

namespace octo::bench {
namespace {

constexpr double kH2dTarget = 0.85;      // achieved H2D during decode / pinned
constexpr double kStreamedTarget = 0.8;  // streamed decode / (H2D / streamed bytes)
constexpr double kOverlapTarget = 0.9;   // max(copy, compute) / wall
constexpr double kResidentTarget = 0.5;  // resident decode / (HBM / weight bytes)

struct Flags {
  std::string model_dir;
  uint64_t vram_budget = uint64_t{2} << 30;
  uint64_t host_budget = kUnlimitedBudget;
  int gpu = 0;
  uint32_t staging_buffers = kDefaultStagingBuffers;
  int tokens = 32;
  int prompt = 16;
  int prefill = 2048;
  std::vector<int> sessions = {1, 8, 32};
  bool accounting_only = false;
  int accounting_passes = 8;
  int copy_mib = 256;
  int copy_reps = 5;
  std::vector<std::string> profile_models;  // two: the profile mode
  std::string profile_name;
  uint32_t full_layers = 0;
  int profile_batch = 1;
  int profile_steps = kLayerTimingEvery;  // a whole round of timed and untimed passes
  bool profile_whole_logits = false;  // the profile's steps take their logits rows whole (not their candidates)
  // A profile line per prompt length: within one attention split, and past
  // it (attention then takes its second launch, as in a longer chat).
  std::vector<int> profile_prompts = {8, 300};
};

using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }
double Gb(double bytes) { return bytes / 1e9; }
// "4.513 GB", or "1.4 MB" below a gigabyte (the executor's tiny models).
std::string Size(double bytes) {
  return bytes >= 1e9 ? absl::StrFormat("%.3f GB", bytes / 1e9) : absl::StrFormat("%.1f MB", bytes / 1e6);
}
std::string FlopRate(double flops) {
  return flops >= 1e12 ? absl::StrFormat("%.1f TFLOP/s", flops / 1e12) : absl::StrFormat("%.2f GFLOP/s", flops / 1e9);
}
const char* Verdict(double ratio, double target) { return ratio >= target ? "OK" : "BELOW"; }

// Deterministic token ids spread over the vocabulary (a pass's cost depends
// on how many tokens, not which).
std::vector<int32_t> Tokens(int count, int seed, uint32_t vocab) {
  std::vector<int32_t> tokens(count);
  for (int i = 0; i < count; ++i) {
    tokens[i] =
        static_cast<int32_t>((static_cast<uint64_t>(seed) * 7919u + static_cast<uint64_t>(i) * 104729u + 1) % vocab);
  }
  return tokens;
}

// ---- limits -------------------------------------------------------------

// cudaMallocHost memory, freed with the object.
class PinnedHost {
 public:
  static absl::StatusOr<PinnedHost> Allocate(size_t bytes) {
    PinnedHost p;
    OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaMallocHost(&p.data_, bytes), "cudaMallocHost"));
    p.bytes_ = bytes;
    return p;
  }
  PinnedHost(PinnedHost&& o) noexcept : data_(o.data_), bytes_(o.bytes_) { o.data_ = nullptr; }
  PinnedHost(const PinnedHost&) = delete;
  PinnedHost& operator=(const PinnedHost&) = delete;
  PinnedHost& operator=(PinnedHost&&) = delete;
  ~PinnedHost() {
    if (data_ != nullptr) cudaFreeHost(data_);
  }
  void* data() const { return data_; }

 private:
  PinnedHost() = default;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Two events, destroyed with the object.
class EventPair {
 public:
  static absl::StatusOr<EventPair> Create() {
    EventPair e;
    OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaEventCreate(&e.start_), "cudaEventCreate"));
    OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaEventCreate(&e.stop_), "cudaEventCreate"));
    return e;
  }
  EventPair(EventPair&& o) noexcept : start_(o.start_), stop_(o.stop_) { o.start_ = o.stop_ = nullptr; }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  EventPair& operator=(EventPair&&) = delete;
  ~EventPair() {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
  }

  // Seconds `copy` takes on `stream`, best of `reps` (each waited for: the
  // one host wait per rep is what ends the timing).
  template <typename F>
  absl::StatusOr<double> BestSeconds(cudaStream_t stream, int reps, F&& copy) {
    double best = 0;
    for (int r = 0; r < reps; ++r) {
      OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaEventRecord(start_, stream), "cudaEventRecord"));
      OCTO_RETURN_IF_ERROR(copy());
      OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaEventRecord(stop_, stream), "cudaEventRecord"));
      OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaEventSynchronize(stop_), "cudaEventSynchronize"));
      float ms = 0;
      OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime"));
      const double s = ms / 1e3;
      if (s > 0 && (best == 0 || s < best)) best = s;
    }
    return best;
  }

 private:
  EventPair() = default;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

struct Limits {
  double h2d_bytes_per_s = 0;  // pinned host -> device, bytes copied per second
  double hbm_bytes_per_s = 0;  // device -> device, bytes read + written per second
  uint64_t h2d_bytes = 0, hbm_bytes = 0;
  int reps = 0;
};

absl::StatusOr<Limits> MeasureLimits(const Flags& f) {
  Limits l;
  l.reps = f.copy_reps;
  OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaSetDevice(f.gpu), absl::StrCat("device ", f.gpu)));
  OCTO_ASSIGN_OR_RETURN(const cuda::CudaStream stream, cuda::CudaStream::Create());
  OCTO_ASSIGN_OR_RETURN(EventPair events, EventPair::Create());
  {
    l.h2d_bytes = static_cast<uint64_t>(f.copy_mib) << 20;
    OCTO_ASSIGN_OR_RETURN(const PinnedHost host, PinnedHost::Allocate(l.h2d_bytes));
    std::memset(host.data(), 1, l.h2d_bytes);  // touched before timing
    OCTO_ASSIGN_OR_RETURN(const cuda::DeviceBuffer device, cuda::DeviceBuffer::Allocate(l.h2d_bytes));
    auto copy = [&] {
      return CudaCallStatus(
          cudaMemcpyAsync(device.data(), host.data(), l.h2d_bytes, cudaMemcpyHostToDevice, stream.get()),
          "cudaMemcpyAsync H2D");
    };
    OCTO_RETURN_IF_ERROR(copy());  // untimed: first-touch costs
    OCTO_ASSIGN_OR_RETURN(const double s, events.BestSeconds(stream.get(), f.copy_reps, copy));
    l.h2d_bytes_per_s = l.h2d_bytes / s;
  }
  {
    // Far larger than L2 (50 MB on an H100), an eighth of the device at most.
    const DeviceMemory memory = QueryDeviceMemory();
    l.hbm_bytes = std::min<uint64_t>(uint64_t{1} << 30, memory.total_bytes / 8);
    OCTO_ASSIGN_OR_RETURN(const cuda::DeviceBuffer src, cuda::DeviceBuffer::Allocate(l.hbm_bytes));
    OCTO_ASSIGN_OR_RETURN(const cuda::DeviceBuffer dst, cuda::DeviceBuffer::Allocate(l.hbm_bytes));
    OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaMemsetAsync(src.data(), 1, l.hbm_bytes, stream.get()), "cudaMemsetAsync"));
    auto copy = [&] {
      return CudaCallStatus(
          cudaMemcpyAsync(dst.data(), src.data(), l.hbm_bytes, cudaMemcpyDeviceToDevice, stream.get()),
          "cudaMemcpyAsync D2D");
    };
    OCTO_RETURN_IF_ERROR(copy());
    OCTO_ASSIGN_OR_RETURN(const double s, events.BestSeconds(stream.get(), f.copy_reps, copy));
    l.hbm_bytes_per_s = 2.0 * l.hbm_bytes / s;
  }
  return l;
}

// ---- the model's passes -------------------------------------------------

// The device tier's sums, from the per-layer read-back (timed copies x file
// size and copy time come back together, so their ratio is exact at any
// moment; the benchmark times every use: SetTimingEvery(1)).
struct Totals {
  uint64_t copied_bytes = 0;  // copies read back x layer file size
  double copy_s = 0, wait_s = 0, compute_s = 0;
};

Totals ReadTotals(Model& model, const std::vector<uint64_t>& layer_bytes) {
  const DeviceTierStats s = model.weights().DeviceStats();
  Totals t;
  for (size_t l = 0; l < s.copies.size() && l < layer_bytes.size(); ++l) {
    t.copied_bytes += s.timed_copies[l] * layer_bytes[l];
    t.copy_s += s.copy_seconds_by_layer[l];
    t.wait_s += s.wait_seconds_by_layer[l];
    t.compute_s += s.compute_seconds_by_layer[l];
  }
  return t;
}

Totals operator-(const Totals& a, const Totals& b) {
  return Totals{a.copied_bytes - b.copied_bytes, a.copy_s - b.copy_s, a.wait_s - b.wait_s, a.compute_s - b.compute_s};
}

// A timed run: wall seconds (each Forward ends waiting for its logits, so
// the wall clock covers the device's work), tokens and the device's sums.
struct Run {
  double seconds = 0;
  int tokens = 0;
  Totals device;
  double rate() const { return tokens / seconds; }
};

// `batch` sequences each prefilled with `prompt` tokens in one pass and
// stepped twice (untimed), then `steps` passes of one token per sequence.
// The device's sums come back two passes late (device_layers.h reads a
// layer's events when it comes round again): read before and after the
// timed passes, their difference is `steps` rounds that end two passes
// early, so the two untimed steps make those rounds decode steps too,
// never the prefill.
absl::StatusOr<Run> Decode(Model& model, const std::vector<uint64_t>& layer_bytes, int batch, int prompt, int steps) {
  const uint32_t vocab = model.config().vocab_size;
  std::vector<std::unique_ptr<KvCache>> caches;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SequenceStep> batch_steps;
  for (int b = 0; b < batch; ++b) {
    caches.push_back(model.NewCache(prompt + steps + 2));
    prompts.push_back(Tokens(prompt, b, vocab));
  }
  for (int b = 0; b < batch; ++b) batch_steps.push_back({.kv = caches[b].get(), .tokens = prompts[b]});
  std::vector<float> logits;
  OCTO_RETURN_IF_ERROR(model.Forward(batch_steps, logits));
  std::vector<int32_t> next(batch);
  auto step = [&](int t) {
    for (int b = 0; b < batch; ++b) {
      next[b] = Tokens(1, 1000 + t * batch + b, vocab)[0];
      batch_steps[b].tokens = std::span<const int32_t>(&next[b], 1);
    }
    return model.Forward(batch_steps, logits);
  };
  constexpr int kUntimed = 2;
  for (int t = 0; t < kUntimed; ++t) OCTO_RETURN_IF_ERROR(step(t));
  const Totals before = ReadTotals(model, layer_bytes);
  const Clock::time_point start = Clock::now();
  for (int t = kUntimed; t < kUntimed + steps; ++t) OCTO_RETURN_IF_ERROR(step(t));
  return Run{SecondsSince(start), batch * steps, ReadTotals(model, layer_bytes) - before};
}

// One pass over a prompt of `n` tokens, after an untimed one (it grows the
// activations and the op scratch to n rows). Wall time only: the device's
// sums of one pass are not back yet.
absl::StatusOr<Run> Prefill(Model& model, int n) {
  const std::vector<int32_t> prompt = Tokens(n, 7, model.config().vocab_size);
  std::vector<float> logits;
  Run run;
  for (int rep = 0; rep < 2; ++rep) {
    auto kv = model.NewCache(n);
    const SequenceStep step{.kv = kv.get(), .tokens = prompt};
    const Clock::time_point start = Clock::now();
    OCTO_RETURN_IF_ERROR(model.Forward(std::span<const SequenceStep>(&step, 1), logits));
    run = Run{.seconds = SecondsSince(start), .tokens = n, .device = {}};
  }
  return run;
}

// ---- the streamed model's plan and accounting ---------------------------

// Layers as a list of ranges: "0-6, 25-31".
std::string LayerRanges(const std::vector<bool>& in, bool want) {
  std::string out;
  for (size_t l = 0; l < in.size();) {
    if (in[l] != want) {
      ++l;
      continue;
    }
    size_t end = l;
    while (end + 1 < in.size() && in[end + 1] == want) ++end;
    absl::StrAppend(&out, out.empty() ? "" : ", ", l == end ? absl::StrCat(l) : absl::StrCat(l, "-", end));
    l = end + 1;
  }
  return out.empty() ? "none" : out;
}

// Budgets under which a model the asked budget holds whole (a small one,
// the executor's tiny) streams, tightest last: the pinned first and last
// layers, `staging` buffers (each the size of the largest layer that may
// stream, as PlanLayers sizes them) and layer 1; or without layer 1.
std::vector<uint64_t> StreamingBudgets(const std::vector<uint64_t>& b, uint32_t staging) {
  const size_t n = b.size();
  if (n < 3) return {};
  const uint64_t slot = *std::max_element(b.begin() + 1, b.end() - 1);
  const uint64_t pinned_and_slots = b[0] + b[n - 1] + staging * slot;
  return {pinned_and_slots + b[1], pinned_and_slots};
}

struct StreamedPlan {
  ModelOptions options;
  LayerPlan vram;
  std::vector<uint64_t> layer_bytes;  // file sizes, by layer
  uint64_t streamed_bytes = 0;        // per pass: layers not in VRAM
  uint64_t largest_streamed = 0;
  uint32_t streamed_layers = 0;
  std::string note;  // why the budget differs from the one asked, if it does
};

absl::StatusOr<StreamedPlan> PlanStreamed(const Flags& f, const Manifest& manifest) {
  StreamedPlan p;
  OCTO_ASSIGN_OR_RETURN(p.layer_bytes, LayerFileSizes(manifest));
  p.options.backend = "cuda";
  p.options.gpu = f.gpu;
  p.options.staging_buffers = f.staging_buffers;
  p.options.weights.layer_budget_bytes = f.host_budget;
  p.options.vram_budget_bytes = f.vram_budget;
  auto plan = [&] {
    return PlanVram(p.layer_bytes, VramPlanSettings{.budget_bytes = p.options.vram_budget_bytes,
                                                    .staging_buffers = p.options.staging_buffers,
                                                    .pin_first = p.options.vram_pin_first,
                                                    .pin_last = p.options.vram_pin_last});
  };
  OCTO_ASSIGN_OR_RETURN(p.vram, plan());
  for (const uint64_t budget : StreamingBudgets(p.layer_bytes, f.staging_buffers)) {
    if (p.vram.ring_slots > 0) break;
    p.options.vram_budget_bytes = budget;
    p.note = absl::StrFormat(" (--vram-budget %s holds every layer: this one streams some)", Size(f.vram_budget));
    OCTO_ASSIGN_OR_RETURN(p.vram, plan());
  }
  if (p.vram.ring_slots == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no VRAM budget streams a layer of this ", p.layer_bytes.size(), "-layer model through ",
                     f.staging_buffers, " staging buffers: nothing to measure (use a deeper model or fewer buffers)"));
  }
  for (size_t l = 0; l < p.layer_bytes.size(); ++l) {
    if (p.vram.resident[l]) continue;
    p.streamed_bytes += p.layer_bytes[l];
    p.largest_streamed = std::max(p.largest_streamed, p.layer_bytes[l]);
    ++p.streamed_layers;
  }
  return p;
}

// The accounting check over the model's first `passes` passes (see the
// header). Prints both sides; false when they disagree. Leaves the model as
// it found it (drained, then the same plan applied again).
absl::StatusOr<bool> CheckAccounting(Model& model, const StreamedPlan& p, int passes) {
  const DeviceTierStats start = model.weights().DeviceStats();
  if (start.copied_bytes != 0) return absl::FailedPreconditionError("the accounting needs a model fresh from Open");
  const uint32_t vocab = model.config().vocab_size;
  auto kv = model.NewCache(passes + 4);
  const std::vector<int32_t> prompt = Tokens(4, 3, vocab);
  std::vector<float> logits;
  SequenceStep step{.kv = kv.get(), .tokens = prompt};
  for (int pass = 0; pass < passes; ++pass) {
    if (pass > 0) step.tokens = std::span<const int32_t>(&prompt[pass % prompt.size()], 1);
    OCTO_RETURN_IF_ERROR(model.Forward(std::span<const SequenceStep>(&step, 1), logits));
  }
  const uint64_t copied = model.weights().DeviceStats().copied_bytes;
  const uint64_t expected = static_cast<uint64_t>(passes) * p.streamed_bytes;
  // What the staging buffers can hold of the next pass, never a whole pass more.
  const uint64_t prefetch_limit =
      std::min<uint64_t>(p.streamed_bytes, uint64_t{p.vram.ring_slots} * p.largest_streamed);
  const bool bytes_ok = copied >= expected && copied - expected <= prefetch_limit;
  absl::PrintF("accounting over %d passes (1 prefill of %zu tokens, %d decode steps), streamed layers %s:\n", passes,
               prompt.size(), passes - 1, LayerRanges(p.vram.resident, false));
  absl::PrintF("  DeviceStats().copied_bytes  %14llu\n", static_cast<unsigned long long>(copied));
  absl::PrintF("  %d passes x %llu streamed   %14llu  (+ prefetch of the next pass, at most %llu)\n", passes,
               static_cast<unsigned long long>(p.streamed_bytes), static_cast<unsigned long long>(expected),
               static_cast<unsigned long long>(prefetch_limit));
  if (copied >= expected) {
    // The prefetch is the next pass's first streamed layers (the cyclic
    // order of device_layers.h): say which, when the bytes match some.
    std::string which = "not the first streamed layers of a pass";
    uint64_t prefix = 0;
    std::vector<bool> next(p.layer_bytes.size(), false);
    for (size_t l = 0; l <= p.layer_bytes.size(); ++l) {
      if (prefix == copied - expected) {
        which = prefix == 0 ? "nothing prefetched"
                            : absl::StrCat("the next pass's layers ", LayerRanges(next, true), ", prefetched");
        break;
      }
      if (l == p.layer_bytes.size()) break;
      if (p.vram.resident[l]) continue;
      prefix += p.layer_bytes[l];
      next[l] = true;
    }
    absl::PrintF("  difference                  %14llu  = %s  %s\n", static_cast<unsigned long long>(copied - expected),
                 which, bytes_ok ? "OK" : "DISAGREE");
  } else {
    absl::PrintF("  difference                 -%14llu  DISAGREE: fewer bytes copied than the passes read\n",
                 static_cast<unsigned long long>(expected - copied));
  }

  // Per layer, once every copy's events are read back: the copies of each
  // layer, and that they add up to the same bytes.
  OCTO_RETURN_IF_ERROR(model.weights().Drain());
  const DeviceTierStats s = model.weights().DeviceStats();
  bool layers_ok = s.copies.size() == p.layer_bytes.size();
  uint64_t summed = 0;
  std::string bad;
  for (size_t l = 0; layers_ok && l < s.copies.size(); ++l) {
    summed += s.copies[l] * p.layer_bytes[l];
    const bool ok = p.vram.resident[l] ? s.copies[l] == 0
                                       : s.copies[l] == static_cast<uint64_t>(passes) ||
                                             s.copies[l] == static_cast<uint64_t>(passes) + 1;
    if (!ok) absl::StrAppend(&bad, " layer ", l, (p.vram.resident[l] ? " (VRAM)" : " (streamed)"), ": ", s.copies[l]);
  }
  layers_ok = layers_ok && bad.empty() && summed == copied;
  absl::PrintF("  per layer: VRAM layers copied 0 times, streamed ones %d or %d; sum %llu bytes  %s%s\n", passes,
               passes + 1, static_cast<unsigned long long>(summed), layers_ok ? "OK" : "DISAGREE:",
               bad.empty() ? (summed == copied ? "" : " the sum differs from copied_bytes") : bad);
  OCTO_RETURN_IF_ERROR(model.weights().Apply(p.vram));  // pins the host memory again
  return bytes_ok && layers_ok;
}

// ---- the benchmark ------------------------------------------------------

struct Results {
  Limits limits;
  bool have_limits = false;
  Run decode, prefill_streamed, decode_resident, prefill_resident;
  std::vector<Run> sessions;
};

std::string Describe(const Model& model) {
  const ModelConfig& c = model.config();
  return absl::StrFormat("%s: %s, %u layers, dim %u, hidden %u, heads %u/%u, vocab %u", c.name, c.architecture,
                         c.n_layers, c.dim, c.hidden_dim, c.n_heads, c.n_kv_heads, c.vocab_size);
}

absl::Status RunStreamed(const Flags& f, const StreamedPlan& p, Results& r, bool& accounting_ok) {
  const Clock::time_point open_start = Clock::now();
  OCTO_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Open(f.model_dir, p.options));
  model->weights().SetTimingEvery(1);  // every pass timed: the figures below are sums over them
  const double open_s = SecondsSince(open_start);
  const DeviceTierStats s = model->weights().DeviceStats();
  absl::PrintF("model     %s (opened in %.1f s)\n", Describe(*model), open_s);
  absl::PrintF("device    %s; %.2f of %.2f GB free with the streamed model loaded; programmatic launches %s; "
               "weight prefetch %u bytes a row (OCTO_CUDA_PREFETCH)\n",
               model->backend().Describe(), Gb(s.free_bytes), Gb(s.total_bytes),
               s.programmatic_launches ? "on" : "off (OCTO_CUDA_PDL=0, before sm_90, or its probe failed)",
               s.weight_prefetch_bytes);
  absl::PrintF("streamed  VRAM budget %s%s:\n", Size(p.options.vram_budget_bytes), p.note);
  absl::PrintF("          %u layers in VRAM (%s), %u streamed (%s) through %u staging buffers of %.1f MB\n",
               s.vram_layers, LayerRanges(p.vram.resident, true), p.streamed_layers,
               LayerRanges(p.vram.resident, false), s.staging_buffers, s.staging_bytes / 1e6);
  absl::PrintF("          %s copied per pass; device tier holds %s (+ %s lm_head, norms)\n", Size(p.streamed_bytes),
               Size(s.held_bytes), Size(s.global_bytes));
  absl::PrintF("          host tier: %s\n",
               f.host_budget == kUnlimitedBudget
                   ? "every layer in host RAM, pinned"
                   : absl::StrFormat("budget %s (the rest read from disk per pass)", Size(f.host_budget)));
  std::fflush(stdout);

  OCTO_ASSIGN_OR_RETURN(accounting_ok, CheckAccounting(*model, p, f.accounting_passes));
  std::fflush(stdout);
  if (f.accounting_only) return absl::OkStatus();

  OCTO_ASSIGN_OR_RETURN(r.decode, Decode(*model, p.layer_bytes, 1, f.prompt, f.tokens));
  OCTO_ASSIGN_OR_RETURN(r.prefill_streamed, Prefill(*model, f.prefill));
  for (int b : f.sessions) {
    OCTO_ASSIGN_OR_RETURN(Run run, Decode(*model, p.layer_bytes, b, f.prompt, f.tokens));
    r.sessions.push_back(run);
  }
  return absl::OkStatus();
}

absl::Status RunResident(const Flags& f, Results& r) {
  ModelOptions options;
  options.backend = "cuda";
  options.gpu = f.gpu;
  options.weights.layer_budget_bytes = f.host_budget;
  options.vram_budget_bytes = kUnlimitedBudget;
  OCTO_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Open(f.model_dir, options));
  model->weights().SetTimingEvery(1);
  OCTO_ASSIGN_OR_RETURN(const std::vector<uint64_t> layer_bytes, LayerFileSizes(model->manifest()));
  OCTO_ASSIGN_OR_RETURN(r.decode_resident, Decode(*model, layer_bytes, 1, f.prompt, f.tokens));
  OCTO_ASSIGN_OR_RETURN(r.prefill_resident, Prefill(*model, f.prefill));
  return absl::OkStatus();
}

// One row: what, measured, the limit it is measured against, their ratio
// (none when negative) and, where there is one, the target.
void Row(const std::string& what, const std::string& measured, const std::string& limit, double ratio,
         double target = 0) {
  absl::PrintF("  %-38s %24s   %-44s %6s", what, measured, limit, ratio < 0 ? "" : absl::StrFormat("%.2f", ratio));
  if (target > 0) absl::PrintF("  >= %.2f %s", target, Verdict(ratio, target));
  absl::PrintF("\n");
}

void PrintTable(const Flags& f, const StreamedPlan& p, const WeightBytes& w, const Results& r) {
  const Limits& l = r.limits;
  const double h2d = l.h2d_bytes_per_s;
  const double streamed_bound = h2d / p.streamed_bytes;  // tokens/s when the copies alone take the time
  const double hbm_bound = l.hbm_bytes_per_s / w.total();
  absl::PrintF("\n  %-38s %24s   %-44s %6s  %s\n", "", "measured", "limit", "ratio", "target");
  const Totals& d = r.decode.device;
  const double per_tok = 1e3 / r.decode.tokens;  // ms per token of a sum over the run
  const double achieved = d.copy_s > 0 ? d.copied_bytes / d.copy_s : 0;
  Row("H2D during streamed decode", absl::StrFormat("%.2f GB/s", Gb(achieved)),
      absl::StrFormat("%.2f GB/s pinned cudaMemcpyAsync", Gb(h2d)), achieved / h2d, kH2dTarget);
  Row(absl::StrFormat("streamed decode, batch 1 (%d tok)", r.decode.tokens),
      absl::StrFormat("%.2f tok/s", r.decode.rate()),
      absl::StrFormat("%.2f tok/s = H2D / %s", streamed_bound, Size(p.streamed_bytes)),
      r.decode.rate() / streamed_bound, kStreamedTarget);
  Row("overlap: max(copy, compute) / wall", absl::StrFormat("%.2f ms/tok wall", r.decode.seconds * per_tok),
      absl::StrFormat("copy %.2f, compute %.2f ms/tok", d.copy_s * per_tok, d.compute_s * per_tok),
      std::max(d.copy_s, d.compute_s) / r.decode.seconds, kOverlapTarget);
  Row("  1 - wait/copy (~0 when copy-bound)", absl::StrFormat("wait %.2f ms/tok", d.wait_s * per_tok),
      absl::StrFormat("copy %.2f ms/tok", d.copy_s * per_tok), d.copy_s > 0 ? 1 - d.wait_s / d.copy_s : 0);
  Row(absl::StrFormat("resident decode, batch 1 (%d tok)", r.decode_resident.tokens),
      absl::StrFormat("%.2f tok/s", r.decode_resident.rate()),
      absl::StrFormat("%.1f tok/s = HBM %.0f GB/s / %s", hbm_bound, Gb(l.hbm_bytes_per_s), Size(w.total())),
      r.decode_resident.rate() / hbm_bound, kResidentTarget);
  // Prefill: a streamed pass takes at least its copies and at least the
  // resident pass's compute; the resident one has no bound measured here,
  // its matrices' GFLOP/s are beside it.
  const double copy_ceiling = f.prefill / (p.streamed_bytes / h2d);
  const double prefill_bound = std::min(copy_ceiling, r.prefill_resident.rate());
  Row(absl::StrFormat("prefill %d, resident", f.prefill),
      absl::StrFormat("%.1f tok/s (%s)", r.prefill_resident.rate(),
                      FlopRate(2.0 * w.matmul_elements * r.prefill_resident.rate())),
      "(none measured)", -1);
  Row(absl::StrFormat("prefill %d, streamed", f.prefill), absl::StrFormat("%.1f tok/s", r.prefill_streamed.rate()),
      absl::StrFormat("%.1f tok/s = min(resident, copies %.1f)", prefill_bound, copy_ceiling),
      r.prefill_streamed.rate() / prefill_bound);
  // Sessions share each pass's copies: B sessions are bound by B x batch 1's.
  for (size_t i = 0; i < f.sessions.size(); ++i) {
    const int b = f.sessions[i];
    const Run& run = r.sessions[i];
    Row(absl::StrFormat("%d sessions streamed, aggregate", b),
        absl::StrFormat("%.2f tok/s (%.2fx b1)", run.rate(), run.rate() / r.decode.rate()),
        absl::StrFormat("%.1f tok/s = %d x streamed decode bound", b * streamed_bound, b),
        run.rate() / (b * streamed_bound));
  }
}

// The profile mode: one line (api_profile.h).
absl::Status Profile(const Flags& f) {
  const bool candidates = !f.profile_whole_logits;
  DecodeCalls first_more;  // at the first prompt: the streamed line's resident twin
  for (const int prompt : f.profile_prompts) {
    auto measure = [&](const std::string& dir, bool graphs) {
      return MeasureDecodeCalls(dir, f.gpu, f.profile_batch, f.profile_steps, graphs, candidates, prompt);
    };
    OCTO_ASSIGN_OR_RETURN(const DecodeCalls fewer, measure(f.profile_models[0], /*graphs=*/false));
    OCTO_ASSIGN_OR_RETURN(const DecodeCalls more, measure(f.profile_models[1], /*graphs=*/false));
    if (prompt == f.profile_prompts.front()) first_more = more;
    // MORE again with CUDA graphs on: a token's host calls when it replays.
    OCTO_ASSIGN_OR_RETURN(const DecodeCalls graphed, measure(f.profile_models[1], /*graphs=*/true));
    OCTO_ASSIGN_OR_RETURN(const std::string line,
                          ProfileLine(f.profile_name, fewer, more, f.full_layers > 0 ? f.full_layers : more.layers,
                                      &graphed));
    absl::PrintF("%s\n", line);
  }
  // The MORE model again with every layer streamed through the staging buffers.
  OCTO_ASSIGN_OR_RETURN(const StreamedCalls streamed, MeasureStreamedCalls(f.profile_models[1], f.gpu, f.profile_steps,
                                                                           f.profile_prompts.front()));
  if (f.profile_batch == 1) {
    OCTO_ASSIGN_OR_RETURN(const std::string streamed_line, StreamedProfileLine(f.profile_name, first_more, streamed));
    absl::PrintF("%s\n", streamed_line);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Bench(const Flags& f) {
  Results r;
  if (!f.accounting_only) {
    OCTO_ASSIGN_OR_RETURN(r.limits, MeasureLimits(f));
    absl::PrintF("limits    H2D %.2f GB/s: pinned cudaMemcpyAsync host -> device, %d MiB, best of %d\n",
                 Gb(r.limits.h2d_bytes_per_s), f.copy_mib, r.limits.reps);
    absl::PrintF("          HBM %.1f GB/s: cudaMemcpyAsync device -> device, %.0f MiB, read + written, best of %d\n",
                 Gb(r.limits.hbm_bytes_per_s), r.limits.hbm_bytes / 1048576.0, r.limits.reps);
    std::fflush(stdout);
  }
  OCTO_ASSIGN_OR_RETURN(const Manifest manifest, ReadManifest(f.model_dir));
  OCTO_ASSIGN_OR_RETURN(const StreamedPlan plan, PlanStreamed(f, manifest));
  bool accounting_ok = false;
  OCTO_RETURN_IF_ERROR(RunStreamed(f, plan, r, accounting_ok));
  if (f.accounting_only) return accounting_ok;
  OCTO_RETURN_IF_ERROR(RunResident(f, r));
  const WeightBytes w = WeightBytesPerToken(manifest);
  absl::PrintF("weights   %s read per resident decoded token (layers %s + lm_head %s + norms, one embedding row)\n",
               Size(w.total()), Size(w.layers), Size(w.lm_head));
  PrintTable(f, plan, w, r);
  std::fflush(stdout);
  return accounting_ok;
}

}  // namespace
}  // namespace octo::bench

int main(int argc, char** argv) {
  octo::bench::Flags f;
  CLI::App app{"Measures the CUDA backend (streamed and resident) against the copy and memory limits."};
  app.add_option("--model", f.model_dir, "layer directory (made by octo-ctl decompose)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--profile-models", f.profile_models,
                 "FEWER,MORE: one family's models with fewer and more layers; prints the decode profile line only")
      ->delimiter(',')
      ->expected(2)
      ->check(CLI::ExistingDirectory)
      ->excludes("--model");
  app.add_option("--profile-name", f.profile_name, "what the profile line calls the model (default: MORE)");
  app.add_option("--full-layers", f.full_layers, "layers the per-token figures are scaled to (default: MORE's)");
  app.add_option("--profile-batch", f.profile_batch, "sequences per decode step")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--profile-steps", f.profile_steps, "decode steps counted")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--profile-prompts", f.profile_prompts,
                 "prompt lengths, a profile line each (the streamed line follows the last)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_flag("--profile-whole-logits", f.profile_whole_logits,
               "the profile's decode steps take every logits row whole (default: reduced to its candidates, as a "
               "greedy or top-k request's)");
  app.add_option("--vram-budget", f.vram_budget, "VRAM for layers + staging buffers of the streamed model")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  app.add_option("--host-budget", f.host_budget, "host tier budget (default: every layer in host RAM)")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("--gpu", f.gpu, "device")->capture_default_str();
  app.add_option("--staging-buffers", f.staging_buffers, "staging buffers of the streamed model")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  app.add_option("--tokens", f.tokens, "decode steps per decode figure")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--prompt", f.prompt, "prompt prefilled before each decode run")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--prefill", f.prefill, "prompt length of the prefill figures")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--sessions", f.sessions, "concurrent sessions of the streamed aggregate figures, comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--accounting-only", f.accounting_only, "only the copied-bytes accounting check (CI, executor)");
  app.add_option("--accounting-passes", f.accounting_passes, "passes the accounting counts")
      ->capture_default_str()
      ->check(CLI::Range(2, 1000));
  app.add_option("--copy-mib", f.copy_mib, "pinned buffer of the H2D measurement")
      ->capture_default_str()
      ->check(CLI::Range(16, 16384));
  app.add_option("--copy-reps", f.copy_reps, "copies per limit figure (best)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (f.model_dir.empty() && f.profile_models.empty()) {
    std::fprintf(stderr, "gpu_bench: --model DIR (or --profile-models FEWER,MORE) is required\n");
    return 2;
  }

  if (octo::UsableCudaDevices() == 0) {
    std::fprintf(stderr, "gpu_bench: no usable CUDA device (%s); nothing to measure\n",
                 octo::BuiltWithCuda() ? "no GPU or no driver" : "this build has no CUDA backend");
    return 2;
  }
  if (!f.profile_models.empty()) {
    if (f.profile_name.empty()) f.profile_name = f.profile_models[1];
    const absl::Status profiled = octo::bench::Profile(f);
    if (!profiled.ok()) std::fprintf(stderr, "gpu_bench: %s\n", std::string(profiled.message()).c_str());
    return profiled.ok() ? 0 : 1;
  }
  absl::PrintF("== gpu benchmark: %s ==\n", f.model_dir);
#if defined(OCTO_CUDA_SIM)
  absl::PrintF("(a host executor build: the accounting holds here, the rates measure the executor, not a GPU)\n");
#endif
  const absl::StatusOr<bool> ok = octo::bench::Bench(f);
  std::fflush(stdout);
  if (!ok.ok()) {
    std::fprintf(stderr, "gpu_bench: %s: %s\n", f.model_dir.c_str(), ok.status().ToString().c_str());
    return 1;
  }
  if (!*ok) {
    std::fprintf(stderr, "gpu_bench: the copied bytes disagree with the streamed layers' sizes (see above)\n");
    return 1;
  }
  return 0;
}
