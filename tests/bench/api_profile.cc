#include "tests/bench/api_profile.h"

#include <memory>
#include <span>
#include <vector>

#include "absl/strings/str_format.h"
#include "daemon/engine/model.h"
#include "storage/status_macros.h"

namespace octo::bench {
namespace {

constexpr int kPrompt = 8;
constexpr int kUntimedSteps = 2;

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

}  // namespace

absl::StatusOr<DecodeCalls> MeasureDecodeCalls(const std::string& model_dir, int gpu, int batch, int steps) {
  ModelOptions options;
  options.backend = "cuda";
  options.gpu = gpu;
  options.weights.layer_budget_bytes = kUnlimitedBudget;
  options.vram_budget_bytes = kUnlimitedBudget;
  OCTO_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Open(model_dir, options));
  const uint32_t vocab = model->config().vocab_size;
  std::vector<std::unique_ptr<KvCache>> caches;
  std::vector<std::vector<int32_t>> tokens(batch);
  std::vector<SequenceStep> step(batch);
  for (int b = 0; b < batch; ++b) {
    caches.push_back(model->NewCache(kPrompt + kUntimedSteps + steps));
    for (int i = 0; i < kPrompt; ++i) tokens[b].push_back(static_cast<int32_t>((b * 131 + i * 17 + 1) % vocab));
    step[b] = SequenceStep{.kv = caches[b].get(), .tokens = tokens[b]};
  }
  std::vector<float> logits;
  OCTO_RETURN_IF_ERROR(model->Forward(step, logits));
  std::vector<int32_t> next(batch);
  auto decode = [&](int t) {
    for (int b = 0; b < batch; ++b) {
      next[b] = static_cast<int32_t>((t * 7 + b * 3 + 2) % vocab);
      step[b].tokens = std::span<const int32_t>(&next[b], 1);
    }
    return model->Forward(step, logits);
  };
  for (int t = 0; t < kUntimedSteps; ++t) OCTO_RETURN_IF_ERROR(decode(t));
  const cuda::ApiCounts before = cuda::CurrentApiCounts();
  for (int t = kUntimedSteps; t < kUntimedSteps + steps; ++t) OCTO_RETURN_IF_ERROR(decode(t));
  DecodeCalls calls;
  calls.counted = cuda::CurrentApiCounts() - before;
  calls.layers = model->config().n_layers;
  calls.batch = batch;
  calls.steps = steps;
  return calls;
}

absl::StatusOr<std::string> ProfileLine(const std::string& name, const DecodeCalls& fewer, const DecodeCalls& more,
                                        uint32_t full_layers) {
  if (more.layers <= fewer.layers || fewer.batch != more.batch || fewer.steps <= 0 || more.steps <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a profile needs two models with different layer counts (%u, %u) at one batch (%d, %d)", fewer.layers,
        more.layers, fewer.batch, more.batch));
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
  const bool graph = more.counted.graph_launches > 0;
  return absl::StrFormat(
      "profile: %s batch=%d launches/layer=%.1f launches/token=%.0f host-calls/token=%.0f blocking-waits/token=%.1f "
      "pageable-copies/token=%.1f allocations/token=%.1f graph=%s",
      name, more.batch, launches.per_layer, launches.At(full_layers), calls.At(full_layers), waits.At(full_layers),
      pageable.At(full_layers), allocations.At(full_layers), graph ? "yes" : "no");
}

}  // namespace octo::bench
