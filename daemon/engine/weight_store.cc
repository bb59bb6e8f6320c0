#include "daemon/engine/weight_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/status_macros.h"

namespace octo {

absl::StatusOr<ResidencyPlan> PlanResidency(const std::vector<uint64_t>& layer_bytes, uint64_t budget) {
  ResidencyPlan plan;
  plan.resident.assign(layer_bytes.size(), false);
  uint64_t total = 0;
  for (uint64_t b : layer_bytes) total += b;
  if (total <= budget) {
    plan.resident.assign(layer_bytes.size(), true);
    plan.held_bytes = total;
    return plan;
  }
  // Not everything fits: keep a staging buffer for the largest layer (any
  // layer may end up streamed), then fill the rest, outermost layers first.
  const uint64_t largest = layer_bytes.empty() ? 0 : *std::max_element(layer_bytes.begin(), layer_bytes.end());
  if (largest > budget) {
    return absl::ResourceExhaustedError(absl::StrCat("layer budget of ", budget,
                                                     " bytes is smaller than the largest layer (", largest,
                                                     " bytes); streaming needs room for one layer"));
  }
  plan.staging_bytes = largest;
  uint64_t held = largest;
  const size_t n = layer_bytes.size();
  for (size_t i = 0; i < n; ++i) {
    // 0, n-1, 1, n-2, ...
    const size_t layer = (i % 2 == 0) ? i / 2 : n - 1 - i / 2;
    if (held + layer_bytes[layer] > budget) continue;
    held += layer_bytes[layer];
    plan.resident[layer] = true;
  }
  plan.held_bytes = held;
  return plan;
}

absl::StatusOr<std::unique_ptr<WeightStore>> WeightStore::Open(const std::string& dir,
                                                               const WeightStoreOptions& options) {
  std::unique_ptr<WeightStore> store(new WeightStore());
  store->dir_ = dir;
  OCTO_ASSIGN_OR_RETURN(store->manifest_, ReadManifest(dir));
  const ModelConfig& config = store->manifest_.config;
  OCTO_ASSIGN_OR_RETURN(store->globals_, ResidentGlobals::Load(dir, store->manifest_));
  OCTO_ASSIGN_OR_RETURN(const std::vector<uint64_t> layer_bytes, LayerFileSizes(store->manifest_));
  OCTO_ASSIGN_OR_RETURN(store->plan_, PlanResidency(layer_bytes, options.layer_budget_bytes));

  if (store->plan_.staging_bytes > 0) store->staging_ = AlignedBuffer(store->plan_.staging_bytes);
  store->resident_buffers_.resize(config.n_layers);
  store->resident_weights_.resize(config.n_layers);
  for (uint32_t l = 0; l < config.n_layers; ++l) {
    const ManifestFile& f = *store->manifest_.Layer(l);
    if (store->plan_.resident[l]) {
      AlignedBuffer& buffer = store->resident_buffers_[l];
      OCTO_RETURN_IF_ERROR(ReadModelFile(dir, f, buffer));
      OCTO_ASSIGN_OR_RETURN(store->resident_weights_[l], BindLayerWeights(config, f, buffer.data()));
    } else {
      // Bind over the (empty) staging buffer: binding reads only the
      // manifest, so a malformed layer is reported now, not mid-generation.
      OCTO_RETURN_IF_ERROR(BindLayerWeights(config, f, store->staging_.data()).status());
    }
  }
  return store;
}

absl::StatusOr<const LayerWeights*> WeightStore::Acquire(uint32_t layer) {
  if (layer >= config().n_layers) {
    return absl::InvalidArgumentError(absl::StrCat("layer ", layer, " of ", config().n_layers));
  }
  if (plan_.resident[layer]) return &resident_weights_[layer];
  if (staged_layer_ != kNoLayer) {
    return absl::FailedPreconditionError(absl::StrCat("layer ", layer, " acquired while layer ",
                                                      staged_layer_, " holds the staging buffer"));
  }
  const ManifestFile& f = *manifest_.Layer(layer);
  OCTO_RETURN_IF_ERROR(ReadModelFile(dir_, f, staging_));
  streamed_bytes_ += f.size;
  OCTO_ASSIGN_OR_RETURN(staged_weights_, BindLayerWeights(config(), f, staging_.data()));
  staged_layer_ = layer;
  return &staged_weights_;
}

void WeightStore::Release(uint32_t layer) {
  if (layer == staged_layer_) staged_layer_ = kNoLayer;
}

absl::StatusOr<LayerBytesSource::Bytes> WeightStore::AcquireBytes(uint32_t layer) {
  OCTO_RETURN_IF_ERROR(Acquire(layer).status());
  if (plan_.resident[layer]) {
    return Bytes{.data = resident_buffers_[layer].data(), .size = resident_buffers_[layer].size(), .from_disk = false};
  }
  return Bytes{.data = staging_.data(), .size = manifest_.Layer(layer)->size, .from_disk = true};
}

std::vector<std::pair<const void*, size_t>> WeightStore::HostRegions() const {
  std::vector<std::pair<const void*, size_t>> regions;
  for (const AlignedBuffer& b : resident_buffers_) {
    if (b.size() > 0) regions.emplace_back(b.data(), b.size());
  }
  if (staging_.size() > 0) regions.emplace_back(staging_.data(), staging_.size());
  return regions;
}

}  // namespace octo
