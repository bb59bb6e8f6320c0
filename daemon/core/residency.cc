#include "daemon/core/residency.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/engine/model_files.h"
#include "storage/ring_format.h"
#include "storage/status_macros.h"

namespace octo {

ResidencyManager::ResidencyManager(const Manifest& manifest, const LayerStreamOptions& stream_options,
                                   LayerStreamFactory factory)
    : manifest_(manifest), stream_options_(stream_options), factory_(std::move(factory)) {}

ResidencyManager::~ResidencyManager() = default;

absl::StatusOr<std::unique_ptr<ResidencyManager>> ResidencyManager::Create(const Manifest& manifest,
                                                                           const ResidencySettings& settings,
                                                                           const LayerStreamOptions& stream_options,
                                                                           LayerStreamFactory factory,
                                                                           std::vector<bool> on_device,
                                                                           bool selective_experts) {
  std::unique_ptr<ResidencyManager> m(new ResidencyManager(manifest, stream_options, std::move(factory)));
  m->device_ = std::move(on_device);
  OCTO_ASSIGN_OR_RETURN(m->layer_bytes_, LayerFileSizes(manifest));
  const size_t n = m->layer_bytes_.size();
  m->resident_buffers_.resize(n);
  m->weights_.resize(n);
  m->plan_.resident.assign(n, false);
  m->plan_.pinned.assign(n, false);
  {
    std::lock_guard<std::mutex> lock(m->mu_);
    m->counters_.resize(n);
  }
  // Every layer binds now, over placeholder bytes (binding reads only the
  // manifest), so a malformed layer is reported at load, not mid-generation.
  static const uint8_t kPlaceholder[1] = {};
  for (uint32_t l = 0; l < n; ++l) {
    OCTO_RETURN_IF_ERROR(BindLayerWeights(manifest.config, *manifest.Layer(l), kPlaceholder).status());
  }
  m->SetSelectiveExperts(selective_experts);
  OCTO_RETURN_IF_ERROR(m->Apply(settings));
  return m;
}

void ResidencyManager::SetSelectiveExperts(bool on) {
  const uint32_t n = manifest_.config.n_layers;
  two_phase_.assign(n, false);
  std::string why;
  if (manifest_.config.n_experts == 0) {
    why = "";
  } else if (!on) {
    why = "selective experts are turned off";
  } else if (manifest_.config.n_experts > ring::kMaxRingExperts) {
    why = absl::StrCat("the model has ", manifest_.config.n_experts, " experts per layer; a ring request names at most ",
                       ring::kMaxRingExperts);
  } else {
    for (uint32_t l = 0; l < n; ++l) two_phase_[l] = manifest_.Layer(l)->experts.has_value();
    if (!AnyTwoPhase()) {
      why = absl::StrCat("the layer directory is format ", manifest_.format_version,
                         ", without per-expert blocks; re-decompose it (octo-ctl decompose --force MODEL.gguf DIR) "
                         "to stream only the routed experts");
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  experts_.not_selective = why;
}

void ResidencyManager::SetHeld(uint64_t held) {
  report_.held_bytes = held;
  report_.peak_bytes = std::max(report_.peak_bytes, held);
}

absl::Status ResidencyManager::Apply(const ResidencySettings& settings) {
  // Layers in VRAM cost the host nothing: planned as resident at 0 bytes,
  // and never read here (MoveTo skips them).
  std::vector<uint64_t> host_bytes = layer_bytes_;
  for (size_t l = 0; l < host_bytes.size(); ++l) {
    if (on_device(static_cast<uint32_t>(l))) host_bytes[l] = 0;
  }
  ResidencySettings planned = settings;
  planned.experts_streamed = AnyTwoPhase();
  OCTO_ASSIGN_OR_RETURN(const LayerPlan plan, PlanLayers(host_bytes, planned));
  const LayerPlan old_plan = plan_;
  absl::Status moved = MoveTo(plan);
  if (!moved.ok()) {
    // Back to what worked (its layers read before); the error is the caller's.
    if (!old_plan.resident.empty()) MoveTo(old_plan).IgnoreError();
    return moved;
  }
  settings_ = settings;
  std::lock_guard<std::mutex> lock(mu_);
  report_.pin_first = settings.pin_first;
  report_.pin_last = settings.pin_last;
  report_.auto_budget = settings.auto_budget;
  report_.budget_bytes = settings.budget();
  report_.ring_slots = plan.ring_slots;
  report_.slot_bytes = plan.slot_bytes;
  report_.resident_layers = 0;
  report_.streamed_layers = 0;
  for (uint32_t l = 0; l < plan.resident.size(); ++l) {
    if (on_device(l)) continue;
    ++(plan.resident[l] ? report_.resident_layers : report_.streamed_layers);
  }
  return absl::OkStatus();
}

absl::Status ResidencyManager::MoveTo(const LayerPlan& plan) {
  const size_t n = layer_bytes_.size();
  uint64_t held = 0;
  // 1. Free the layers the new plan streams (or the device now holds), and
  //    shrink the expert cache.
  if (plan.expert_cache_bytes < cache_.stats().capacity_bytes) cache_.Resize(plan.expert_cache_bytes);
  held += cache_.stats().capacity_bytes;
  for (size_t l = 0; l < n; ++l) {
    if ((!plan.resident[l] || on_device(static_cast<uint32_t>(l))) && resident_buffers_[l].size() > 0) {
      resident_buffers_[l] = AlignedBuffer();
    }
    held += resident_buffers_[l].size();
  }
  // 2. Drop the ring when its shape changes (slots, slot size, or none needed).
  const bool same_ring = stream_ != nullptr && plan.ring_slots == plan_.ring_slots &&
                         plan.slot_bytes == plan_.slot_bytes;
  if (stream_ != nullptr && !same_ring) {
    std::lock_guard<std::mutex> lock(mu_);
    const LoaderStats stats = stream_->stats();
    retired_.restarts += stats.restarts;
    retired_.stalls += stats.stalls;
    retired_.bytes_read += stats.bytes_read;
    retired_.read_seconds += stats.read_seconds;
    retired_.checksum_failures += stats.checksum_failures;
    retired_.io_mode = stats.io_mode;
    stream_.reset();
  }
  if (same_ring) held += plan_.ring_bytes();
  {
    std::lock_guard<std::mutex> lock(mu_);
    SetHeld(held);
    for (size_t l = 0; l < n; ++l) {
      plan_.resident[l] = resident_buffers_[l].size() > 0 || on_device(static_cast<uint32_t>(l));
    }
  }
  // 3. Read the layers the new plan adds (the budget leaves room: step 1 freed).
  for (uint32_t l = 0; l < n; ++l) {
    if (!plan.resident[l] || resident_buffers_[l].size() > 0 || on_device(l)) continue;
    const ManifestFile& file = *manifest_.Layer(l);
    AlignedBuffer buffer;
    OCTO_RETURN_IF_ERROR(ReadModelFile(stream_options_.model_dir, file, buffer));
    OCTO_ASSIGN_OR_RETURN(weights_[l], BindLayerWeights(manifest_.config, file, buffer.data()));
    held += buffer.size();
    resident_buffers_[l] = std::move(buffer);
    std::lock_guard<std::mutex> lock(mu_);
    plan_.resident[l] = true;
    SetHeld(held);
  }
  // 4. The ring for the rest.
  if (plan.ring_slots > 0 && !same_ring) {
    LayerStreamOptions options = stream_options_;
    options.slots = plan.ring_slots;
    options.slot_bytes = plan.slot_bytes;
    OCTO_ASSIGN_OR_RETURN(std::unique_ptr<LayerStream> stream, factory_(options));
    std::lock_guard<std::mutex> lock(mu_);
    stream_ = std::move(stream);
    held += plan.ring_bytes();
    SetHeld(held);
  }
  // 5. The expert cache's new size, last: everything above fits beside it.
  if (plan.expert_cache_bytes > cache_.stats().capacity_bytes) {
    held += plan.expert_cache_bytes - cache_.stats().capacity_bytes;
    cache_.Resize(plan.expert_cache_bytes);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    plan_ = plan;
    SetHeld(held);
    // Which layers take two phases changes only with the plan.
    experts_.present = AnyTwoPhase();
    experts_.two_phase_layers = 0;
    for (uint32_t l = 0; l < two_phase_.size(); ++l) experts_.two_phase_layers += TwoPhase(l);
    UpdateExpertReport();
  }
  if (stream_ != nullptr) {
    stream_->SetTwoPhase(two_phase_);
    stream_->SetOrder(plan.StreamedOrder());
  }
  return absl::OkStatus();
}

absl::StatusOr<const LayerWeights*> ResidencyManager::Acquire(uint32_t layer) {
  Touch();
  if (layer >= layer_bytes_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("layer ", layer, " of ", layer_bytes_.size()));
  }
  if (acquired_ != kNoLayer) {
    return absl::FailedPreconditionError(absl::StrCat("layer ", layer, " acquired before layer ", acquired_,
                                                      " was released"));
  }
  if (!plan_.resident[layer]) {
    if (stream_ == nullptr) return absl::InternalError(absl::StrCat("layer ", layer, " is streamed but no ring exists"));
    absl::StatusOr<StreamedLayer> streamed = stream_->Acquire(layer);
    if (!streamed.ok()) return Annotate(streamed.status(), absl::StrCat("layer ", layer));
    const ManifestFile& file = *manifest_.Layer(layer);
    absl::StatusOr<LayerWeights> bound = BindLayerWeights(manifest_.config, file, streamed->data);
    if (!bound.ok()) {
      stream_->Release(layer);
      return bound.status();
    }
    weights_[layer] = *bound;
    HoldForExperts(layer, streamed->data);
    pass_timing_.load_wait_seconds += streamed->wait_seconds;
    std::lock_guard<std::mutex> lock(mu_);
    (TwoPhase(layer) ? experts_.dense_bytes_read : whole_bytes_read_) += streamed->size;
    LayerCounters& c = counters_[layer];
    ++c.loads;
    c.load_seconds += streamed->load_seconds;
    c.wait_seconds += streamed->wait_seconds;
    total_wait_seconds_ += streamed->wait_seconds;
    total_load_seconds_ += streamed->load_seconds;
  }
  acquired_ = layer;
  acquired_at_ = Clock::now();
  return &weights_[layer];
}

void ResidencyManager::HoldForExperts(uint32_t layer, uint8_t* data) {
  if (!TwoPhase(layer)) return;
  if (held_data_.size() != two_phase_.size()) held_data_.assign(two_phase_.size(), nullptr);
  held_data_[layer] = data;
}

absl::Status ResidencyManager::FetchExperts(uint32_t layer, const std::vector<uint32_t>& experts, bool routed) {
  if (!TwoPhase(layer) || stream_ == nullptr) return absl::OkStatus();
  uint8_t* const data = layer < held_data_.size() ? held_data_[layer] : nullptr;
  if (data == nullptr) return absl::FailedPreconditionError(absl::StrCat("layer ", layer, " is not held"));
  if (routed && predicted_layer_ != layer) {
    predicted_.clear();
    prefetch_issued_ = false;
  }
  const ManifestFile& file = *manifest_.Layer(layer);
  const uint32_t count = file.experts->count;
  for (uint32_t e : experts) {
    if (e >= count) return absl::InvalidArgumentError(absl::StrCat("layer ", layer, " has no expert ", e));
  }
  if (prediction_.size() != two_phase_.size()) prediction_.assign(two_phase_.size(), PredictionCounts{});
  PredictionCounts& p = prediction_[layer];
  if (!routed) {
    // A prediction: start reading what the cache does not hold, while the
    // prediction has been worth it on this layer.
    predicted_layer_ = layer;
    predicted_.clear();
    for (uint32_t e : experts) {
      if (!cache_.Contains(layer, e)) predicted_.push_back(e);
    }
    prefetch_issued_ = p.passes < kPrefetchWarmup || p.predicted >= kMinPrefetchHitRate * p.from_disk;
    if (!prefetch_issued_) return absl::OkStatus();
    {
      std::lock_guard<std::mutex> lock(mu_);
      experts_.prefetched += predicted_.size();
    }
    return Annotate(stream_->FetchExperts(layer, predicted_, /*wait=*/false), absl::StrCat("layer ", layer));
  }
  std::vector<bool> is_routed(count, false);
  for (uint32_t e : experts) is_routed[e] = true;
  // Most of the layer routed to (prefill, a large batch): read all of it in one go.
  const bool whole = ReadsAllExperts(experts.size(), count);
  std::vector<uint32_t> present, from_disk;
  uint64_t predicted_hits = 0, routed_from_disk = 0;
  for (uint32_t e = 0; e < count; ++e) {
    if (!is_routed[e] && !whole) continue;
    const uint8_t* cached = is_routed[e] ? cache_.Use(layer, e) : cache_.Peek(layer, e);
    const ByteRange range = ExpertRange(file, e);
    if (cached != nullptr) {
      std::memcpy(data + range.offset, cached, range.bytes);
      present.push_back(e);
      continue;
    }
    from_disk.push_back(e);
    if (is_routed[e]) {
      ++routed_from_disk;
      predicted_hits += std::find(predicted_.begin(), predicted_.end(), e) != predicted_.end();
    }
  }
  uint64_t wasted = 0;
  if (prefetch_issued_) {
    for (uint32_t e : predicted_) wasted += !is_routed[e];
  }
  ++p.passes;
  p.from_disk += routed_from_disk;
  p.predicted += predicted_hits;
  stream_->MarkExpertsPresent(layer, present);
  OCTO_RETURN_IF_ERROR(
      Annotate(stream_->FetchExperts(layer, from_disk, /*wait=*/true), absl::StrCat("layer ", layer)));
  for (uint32_t e : from_disk) {
    const ByteRange range = ExpertRange(file, e);
    if (is_routed[e]) cache_.Offer(layer, e, data + range.offset, range.bytes);
  }
  predicted_layer_ = kNoLayer;
  std::lock_guard<std::mutex> lock(mu_);
  experts_.routed += experts.size();
  experts_.prefetch_wasted += wasted;
  experts_.routed_from_disk += routed_from_disk;
  experts_.predicted += predicted_hits;
  experts_.whole_layer_reads += whole;
  UpdateExpertReport();
  return absl::OkStatus();
}

void ResidencyManager::UpdateExpertReport() {
  const ExpertCacheStats& c = cache_.stats();
  experts_.cache_capacity_bytes = c.capacity_bytes;
  experts_.cache_held_bytes = c.held_bytes;
  experts_.cache_entries = c.entries;
  experts_.cache_hits = c.hits;
  experts_.cache_misses = c.misses;
  experts_.cache_evictions = c.evictions;
}

void ResidencyManager::Release(uint32_t layer) {
  Touch();
  if (layer != acquired_) return;
  const double seconds = std::chrono::duration<double>(Clock::now() - acquired_at_).count();
  pass_timing_.compute_seconds += seconds;
  acquired_ = kNoLayer;
  if (layer < held_data_.size()) held_data_[layer] = nullptr;
  if (!plan_.resident[layer] && stream_ != nullptr) stream_->Release(layer);
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_[layer].passes;
  counters_[layer].compute_seconds += seconds;
}

absl::StatusOr<LayerBytesSource::Bytes> ResidencyManager::AcquireBytes(uint32_t layer) {
  Touch();
  if (layer >= layer_bytes_.size() || on_device(layer)) {
    return absl::InvalidArgumentError(absl::StrCat("layer ", layer, " is not held by the host"));
  }
  if (plan_.resident[layer]) {
    return Bytes{.data = resident_buffers_[layer].data(), .size = layer_bytes_[layer], .from_disk = false};
  }
  if (stream_ == nullptr) return absl::InternalError(absl::StrCat("layer ", layer, " is streamed but no ring exists"));
  absl::StatusOr<StreamedLayer> streamed = stream_->Acquire(layer);
  if (!streamed.ok()) return Annotate(streamed.status(), absl::StrCat("layer ", layer));
  pass_timing_.load_wait_seconds += streamed->wait_seconds;
  HoldForExperts(layer, streamed->data);
  std::lock_guard<std::mutex> lock(mu_);
  (TwoPhase(layer) ? experts_.dense_bytes_read : whole_bytes_read_) += streamed->size;
  LayerCounters& c = counters_[layer];
  ++c.loads;
  c.load_seconds += streamed->load_seconds;
  c.wait_seconds += streamed->wait_seconds;
  total_wait_seconds_ += streamed->wait_seconds;
  total_load_seconds_ += streamed->load_seconds;
  return Bytes{.data = streamed->data, .size = layer_bytes_[layer], .from_disk = true};
}

void ResidencyManager::ReleaseBytes(uint32_t layer) {
  Touch();
  if (layer < held_data_.size()) held_data_[layer] = nullptr;
  if (layer < layer_bytes_.size() && !plan_.resident[layer] && stream_ != nullptr) stream_->Release(layer);
}

std::vector<std::pair<const void*, size_t>> ResidencyManager::HostRegions() const {
  std::vector<std::pair<const void*, size_t>> regions;
  for (const AlignedBuffer& b : resident_buffers_) {
    if (b.size() > 0) regions.emplace_back(b.data(), b.size());
  }
  if (stream_ != nullptr && stream_->slot_memory().first != nullptr) regions.push_back(stream_->slot_memory());
  return regions;
}

PassTiming ResidencyManager::TakePassTiming() { return std::exchange(pass_timing_, PassTiming{}); }

ResidencyReport ResidencyManager::Report() const {
  std::lock_guard<std::mutex> lock(mu_);
  ResidencyReport report = report_;
  report.experts = experts_;
  // Expert bytes: what the loader read beyond dense parts and whole layers.
  const uint64_t loader_bytes = retired_.bytes_read + (stream_ != nullptr ? stream_->stats().bytes_read : 0);
  const uint64_t other = experts_.dense_bytes_read + whole_bytes_read_;
  report.experts.expert_bytes_read = loader_bytes > other ? loader_bytes - other : 0;
  return report;
}

std::vector<LayerReport> ResidencyManager::LayerReports() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LayerReport> out(layer_bytes_.size());
  for (size_t l = 0; l < out.size(); ++l) {
    const LayerCounters& c = counters_[l];
    LayerReport& r = out[l];
    r.resident = plan_.resident[l];
    r.pinned = plan_.pinned[l];
    r.tier = on_device(static_cast<uint32_t>(l)) ? LayerTier::kDevice
                                                  : (plan_.resident[l] ? LayerTier::kHost : LayerTier::kDisk);
    r.bytes = layer_bytes_[l];
    r.loads = c.loads;
    if (c.loads > 0) {
      r.load_seconds = c.load_seconds / c.loads;
      r.load_wait_seconds = c.wait_seconds / c.loads;
    }
    if (c.passes > 0) r.compute_seconds = c.compute_seconds / c.passes;
  }
  return out;
}

LoaderStats ResidencyManager::loader_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (stream_ == nullptr) return retired_;
  LoaderStats stats = stream_->stats();
  stats.restarts += retired_.restarts;
  stats.stalls += retired_.stalls;
  stats.bytes_read += retired_.bytes_read;
  stats.read_seconds += retired_.read_seconds;
  stats.checksum_failures += retired_.checksum_failures;
  return stats;
}

double ResidencyManager::overlap() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (total_load_seconds_ <= 0) return 0;
  return std::clamp(1.0 - total_wait_seconds_ / total_load_seconds_, 0.0, 1.0);
}

}  // namespace octo
