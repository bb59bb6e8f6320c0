#include "tests/bench/api_profile.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/strings/str_format.h"
#include "daemon/engine/model.h"
#include "daemon/engine/model_files.h"
#include "storage/manifest.h"
#include "storage/status_macros.h"

namespace octo::bench {
namespace {

// Decode steps before the counted ones, enough for every graph to be
// captured: a hybrid's states alternate (two graphs), and after a prompt
// longer than one decode launch (16 tokens) its fifth step still captured
// one (measured), so six.
constexpr int kUntimedSteps = 6;

// Per layer and per token of one counter: the layers' share is the
// difference between the models over the layers between them, the rest is
// what the token costs outside its layers.
struct Split {
  double per_layer = 0;
  double outside = 0;
  double At(uint32_t layers) const { return outside + per_layer * layers; }
};

Split SplitCount(uint64_t fewer, uint64_t more, uint32_t fewer_layers, uint32_t more_layers, int steps_fewer,
                 int steps_more) {
  const double a = static_cast<double>(fewer) / steps_fewer;
  const double b = static_cast<double>(more) / steps_more;
  Split s;
  s.per_layer = (b - a) / (more_layers - fewer_layers);
  s.outside = a - s.per_layer * fewer_layers;
  return s;
}

// Prefills `batch` sequences of `prompt` tokens of `model`, decodes four
// tokens untimed, then `steps` more between `start` and `stop` (while the
// caches still live).
absl::Status Decode(Model& model, int batch, int prompt, int steps, bool candidates,
                    const std::function<void()>& start, const std::function<void()>& stop) {
  if (prompt < 1) return absl::InvalidArgumentError(absl::StrFormat("a prompt of %d tokens: at least 1", prompt));
  const uint32_t vocab = model.config().vocab_size;
  std::vector<std::unique_ptr<KvCache>> caches;
  std::vector<std::vector<int32_t>> tokens(batch);
  std::vector<SequenceStep> step(batch);
  for (int b = 0; b < batch; ++b) {
    caches.push_back(model.NewCache(prompt + kUntimedSteps + steps));
    for (int i = 0; i < prompt; ++i) tokens[b].push_back(static_cast<int32_t>((b * 131 + i * 17 + 1) % vocab));
    step[b] = SequenceStep{.kv = caches[b].get(), .tokens = tokens[b], .candidates = candidates};
  }
  std::vector<float> logits;
  std::vector<LogitCandidates> reduced;
  OCTO_RETURN_IF_ERROR(model.Forward(step, logits, nullptr, &reduced));
  std::vector<int32_t> next(batch);
  auto decode = [&](int t) {
    for (int b = 0; b < batch; ++b) {
      next[b] = static_cast<int32_t>((t * 7 + b * 3 + 2) % vocab);
      step[b].tokens = std::span<const int32_t>(&next[b], 1);
    }
    return model.Forward(step, logits, nullptr, &reduced);
  };
  for (int t = 0; t < kUntimedSteps; ++t) OCTO_RETURN_IF_ERROR(decode(t));
  start();
  for (int t = kUntimedSteps; t < kUntimedSteps + steps; ++t) OCTO_RETURN_IF_ERROR(decode(t));
  stop();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DecodeCalls> MeasureDecodeCalls(const std::string& model_dir, int gpu, int batch, int steps,
                                               bool graphs, bool candidates, int prompt) {
  ModelOptions options;
  options.backend = "cuda";
  options.cuda_graphs = graphs;
  options.gpu = gpu;
  options.weights.layer_budget_bytes = kUnlimitedBudget;
  options.vram_budget_bytes = kUnlimitedBudget;
  OCTO_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Open(model_dir, options));
  cuda::ApiCounts before, after;
  OCTO_RETURN_IF_ERROR(Decode(
      *model, batch, prompt, steps, candidates, [&] { before = cuda::CurrentApiCounts(); },
      [&] { after = cuda::CurrentApiCounts(); }));
  DecodeCalls calls;
  calls.counted = after - before;
  calls.layers = model->config().n_layers;
  calls.batch = batch;
  calls.steps = steps;
  calls.graphs = graphs;
  calls.candidates = candidates;
  calls.context = prompt + kUntimedSteps;
  return calls;
}

absl::StatusOr<StreamedCalls> MeasureStreamedCalls(const std::string& model_dir, int gpu, int steps, int prompt) {
  OCTO_ASSIGN_OR_RETURN(const Manifest manifest, ReadManifest(model_dir));
  OCTO_ASSIGN_OR_RETURN(const std::vector<uint64_t> sizes, LayerFileSizes(manifest));
  ModelOptions options;
  options.backend = "cuda";
  options.gpu = gpu;
  options.weights.layer_budget_bytes = kUnlimitedBudget;  // the host tier holds every layer
  options.vram_pin_first = options.vram_pin_last = 0;
  options.vram_budget_bytes = options.staging_buffers * *std::max_element(sizes.begin(), sizes.end());
  OCTO_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Open(model_dir, options));
  DeviceTierStats start, end;
  cuda::ApiCounts before, after;
  OCTO_RETURN_IF_ERROR(Decode(
      *model, 1, prompt, steps, /*candidates=*/true,
      [&] {
        start = model->weights().DeviceStats();
        before = cuda::CurrentApiCounts();
      },
      [&] {
        after = cuda::CurrentApiCounts();
        end = model->weights().DeviceStats();
      }));
  StreamedCalls calls;
  calls.counted = after - before;
  if (end.vram_layers != 0) {
    return absl::InternalError(absl::StrCat(end.vram_layers, " layers stayed in VRAM; the profile streams them all"));
  }
  calls.layers = model->config().n_layers;
  calls.staging_buffers = end.staging_buffers;
  calls.steps = steps;
  // The counted steps' acquires, by copies found ahead.
  bool seen = false;
  for (size_t k = 0; k < end.acquires_by_copies_ahead.size(); ++k) {
    const uint64_t before_k = k < start.acquires_by_copies_ahead.size() ? start.acquires_by_copies_ahead[k] : 0;
    const uint64_t n = end.acquires_by_copies_ahead[k] - before_k;
    if (n == 0) continue;
    if (!seen) calls.min_copies_ahead = static_cast<uint32_t>(k);
    seen = true;
    calls.acquires += n;
    calls.copies_ahead += n * k;
  }
  return calls;
}

absl::StatusOr<std::string> StreamedProfileLine(const std::string& name, const DecodeCalls& resident,
                                                const StreamedCalls& streamed) {
  if (resident.layers != streamed.layers || resident.batch != 1 || resident.steps <= 0 || streamed.steps <= 0 ||
      streamed.acquires == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a streamed profile needs the resident run of the same model at batch 1 (%u and %u layers, batch %d, "
        "%llu streamed acquires)", resident.layers, streamed.layers, resident.batch,
        static_cast<unsigned long long>(streamed.acquires)));
  }
  const double waits = static_cast<double>(streamed.counted.blocking_waits) / streamed.steps -
                       static_cast<double>(resident.counted.blocking_waits) / resident.steps;
  return absl::StrFormat(
      "profile-streamed: %s layers=%u staging=%u pageable-h2d-bytes/token=%.0f blocking-waits/streamed-layer=%.2f "
      "copies-ahead/acquire=min %u mean %.2f",
      name, streamed.layers, streamed.staging_buffers,
      static_cast<double>(streamed.counted.pageable_bytes) / streamed.steps, waits / streamed.layers,
      streamed.min_copies_ahead, static_cast<double>(streamed.copies_ahead) / streamed.acquires);
}

absl::StatusOr<std::string> ProfileLine(const std::string& name, const DecodeCalls& fewer, const DecodeCalls& more,
                                        uint32_t full_layers, const DecodeCalls* graphed) {
  if (more.layers <= fewer.layers || fewer.batch != more.batch || fewer.context != more.context ||
      fewer.steps <= 0 || more.steps <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a profile needs two models with different layer counts (%u, %u) at one batch (%d, %d) and context (%d, %d)",
        fewer.layers, more.layers, fewer.batch, more.batch, fewer.context, more.context));
  }
  auto split = [&](uint64_t cuda::ApiCounts::*counter) {
    return SplitCount(fewer.counted.*counter, more.counted.*counter, fewer.layers, more.layers, fewer.steps,
                      more.steps);
  };
  const Split launches = split(&cuda::ApiCounts::launches);
  const Split calls = split(&cuda::ApiCounts::host_calls);
  const Split waits = split(&cuda::ApiCounts::blocking_waits);
  const Split pageable = split(&cuda::ApiCounts::pageable_copies);
  const Split allocations = split(&cuda::ApiCounts::allocations);
  // Per token: the eager runs' split, scaled to full_layers, or the graphed
  // run's own (a replay's calls do not grow with the layers).
  double calls_per_token = calls.At(full_layers), waits_per_token = waits.At(full_layers);
  double pageable_per_token = pageable.At(full_layers), allocations_per_token = allocations.At(full_layers);
  bool graph = false;
  if (graphed != nullptr) {
    if (graphed->batch != more.batch || graphed->steps <= 0) {
      return absl::InvalidArgumentError("the graphed run must be at the eager runs' batch, over some steps");
    }
    const auto per_token = [&](uint64_t cuda::ApiCounts::*counter) {
      return static_cast<double>(graphed->counted.*counter) / graphed->steps;
    };
    calls_per_token = per_token(&cuda::ApiCounts::host_calls);
    waits_per_token = per_token(&cuda::ApiCounts::blocking_waits);
    pageable_per_token = per_token(&cuda::ApiCounts::pageable_copies);
    allocations_per_token = per_token(&cuda::ApiCounts::allocations);
    graph = graphed->counted.graph_launches > 0;
  }
  return absl::StrFormat(
      "profile: %s batch=%d launches/layer=%.1f launches/token=%.0f host-calls/token=%.0f blocking-waits/token=%.1f "
      "pageable-copies/token=%.1f allocations/token=%.1f graph=%s d2h-bytes/token=%.0f context=%d",
      name, more.batch, launches.per_layer, launches.At(full_layers), calls_per_token, waits_per_token,
      pageable_per_token, allocations_per_token, graph ? "yes" : "no",
      static_cast<double>(more.counted.d2h_bytes) / more.steps, more.context);
}

}  // namespace octo::bench
