#include "daemon/engine/cuda/device_layers.h"

#include <algorithm>
#include <cuda_runtime_api.h>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/engine/aligned_buffer.h"
#include "daemon/engine/layer_weights.h"
#include "daemon/engine/model_files.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

absl::Status NewEvent(cudaEvent_t* event) {
  return CudaCallStatus(cudaEventCreateWithFlags(event, cudaEventDefault), "cudaEventCreate");
}

void DestroyEvent(cudaEvent_t& event) {
  if (event != nullptr) cudaEventDestroy(event);
  event = nullptr;
}

// Seconds between two completed events; 0 when either is not usable.
// Seconds between two recorded events; waits for `to` only when it is not
// done yet (the events are read a round after they were recorded, so almost
// never: the timing sample costs no blocking wait).
double Elapsed(cudaEvent_t from, cudaEvent_t to) {
  if (cudaEventQuery(to) != cudaSuccess) {
    cudaGetLastError();  // cudaErrorNotReady
    if (cudaEventSynchronize(to) != cudaSuccess) return 0;
  }
  float ms = 0;
  if (cudaEventElapsedTime(&ms, from, to) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return std::max(0.0f, ms) / 1000.0;
}

}  // namespace

DeviceLayers::DeviceLayers(CudaBackend& backend, const Manifest& manifest, std::string model_dir,
                           LayerBytesSource& host)
    : backend_(backend), manifest_(manifest), model_dir_(std::move(model_dir)), host_(host) {}

DeviceLayers::~DeviceLayers() {
  Drain().IgnoreError();
  for (Slot& s : slots_) {
    DestroyEvent(s.slot_free);
    DestroyEvent(s.experts_copied);
  }
  for (LayerEvents& e : events_) {
    for (EventSet& set : e.sets) {
      for (cudaEvent_t* ev : {&set.copy_start, &set.copy_done, &set.gap_start, &set.start, &set.end}) DestroyEvent(*ev);
    }
  }
}

absl::StatusOr<std::unique_ptr<DeviceLayers>> DeviceLayers::Create(CudaBackend& backend, const Manifest& manifest,
                                                                   const std::string& model_dir,
                                                                   LayerBytesSource& host,
                                                                   const DeviceLayersPlan& plan) {
  std::unique_ptr<DeviceLayers> d(new DeviceLayers(backend, manifest, model_dir, host));
  const uint32_t n = manifest.config.n_layers;
  OCTO_ASSIGN_OR_RETURN(d->copy_stream_, cuda::CudaStream::Create());
  d->vram_.resize(n);
  d->weights_.resize(n);
  d->events_.resize(n);
  for (LayerEvents& e : d->events_) {
    for (EventSet& set : e.sets) {
      for (cudaEvent_t* ev : {&set.copy_start, &set.copy_done, &set.gap_start, &set.start, &set.end}) {
        OCTO_RETURN_IF_ERROR(NewEvent(ev));
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(d->mu_);
    d->timings_.resize(n);
  }
  d->plan_.in_vram.assign(n, false);
  d->plan_.staging_buffers = 0;
  OCTO_RETURN_IF_ERROR(d->Apply(plan));
  return d;
}

void DeviceLayers::SetHeld(uint64_t held) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.held_bytes = held;
  stats_.peak_bytes = std::max(stats_.peak_bytes, held);
}

absl::Status DeviceLayers::Pin() {
  uint64_t unpinned = 0;
  std::string error;
  for (const auto& [data, size] : host_.HostRegions()) {
    const cudaError_t e = cudaHostRegister(const_cast<void*>(data), size, cudaHostRegisterDefault);
    if (e == cudaErrorHostMemoryAlreadyRegistered) {  // pinned by its owner: as fast, not ours to unpin
      cudaGetLastError();
      continue;
    }
    if (e != cudaSuccess) {
      // Copied as pageable memory: right, but slower and never overlapped;
      // status and the log say so (a memlock limit is the usual cause).
      cudaGetLastError();
      unpinned += size;
      if (error.empty()) error = absl::StrCat(cudaGetErrorName(e), ": ", cudaGetErrorString(e));
      continue;
    }
    pinned_.push_back(data);
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.unpinned_bytes = unpinned;
  stats_.pin_error = std::move(error);
  return absl::OkStatus();
}

void DeviceLayers::Unpin() {
  for (const void* p : pinned_) cudaHostUnregister(const_cast<void*>(p));
  pinned_.clear();
}

absl::Status DeviceLayers::Drain() {
  absl::Status status = copy_stream_.Synchronize();
  absl::Status compute = CudaCallStatus(cudaStreamSynchronize(backend_.stream()), "the compute stream");
  if (status.ok()) status = compute;
  for (Slot& s : slots_) {
    if (s.host_held) host_.ReleaseBytes(s.layer);
    s.host_held = false;
    s.keep_host = false;
    s.state = Slot::kFree;
    s.layer = kNoLayer;
  }
  for (const PendingBytes& p : pending_) host_.ReleaseBytes(p.layer);  // both streams are idle: copied
  pending_.clear();
  for (uint32_t l = 0; l < events_.size(); ++l) {
    for (EventSet& set : events_[l].sets) {
      HarvestCopy(l, set);
      HarvestCompute(l, set);
    }
  }
  acquired_ = kNoLayer;
  Unpin();
  return status;
}

absl::Status DeviceLayers::Apply(const DeviceLayersPlan& plan) {
  const uint32_t n = manifest_.config.n_layers;
  if (plan.in_vram.size() != n) return absl::InvalidArgumentError("device plan: one entry per layer");
  OCTO_RETURN_IF_ERROR(Drain());
  uint64_t held = 0;
  // 1. Free what the plan drops, and the staging buffers when their shape changes.
  uint64_t staging_bytes = 0;
  std::vector<uint32_t> order;
  for (uint32_t l = 0; l < n; ++l) {
    if (!plan.in_vram[l]) {
      order.push_back(l);
      staging_bytes = std::max(staging_bytes, manifest_.Layer(l)->size);
      vram_[l] = BackendBuffer();
    }
    held += vram_[l].size();
  }
  const uint32_t want_slots = order.empty() ? 0 : std::max<uint32_t>(1, plan.staging_buffers);
  const bool same_staging = slots_.size() == want_slots && (slots_.empty() || slots_[0].memory.size() == staging_bytes);
  if (!same_staging) {
    for (Slot& s : slots_) {
    DestroyEvent(s.slot_free);
    DestroyEvent(s.experts_copied);
  }
    slots_.clear();
  }
  SetHeld(held + (same_staging ? want_slots * staging_bytes : 0));
  // 2. Read the layers the plan adds into VRAM.
  for (uint32_t l = 0; l < n; ++l) {
    if (!plan.in_vram[l] || vram_[l].size() > 0) continue;
    const ManifestFile& file = *manifest_.Layer(l);
    AlignedBuffer bytes;
    OCTO_RETURN_IF_ERROR(ReadModelFile(model_dir_, file, bytes));
    absl::StatusOr<BackendBuffer> memory = backend_.Allocate(file.size);
    if (!memory.ok()) return Annotate(memory.status(), absl::StrCat("layer ", l, " into the VRAM tier"));
    OCTO_RETURN_IF_ERROR(backend_.Upload(memory->data(), bytes.data(), file.size));
    OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaStreamSynchronize(backend_.stream()), "uploading a layer"));
    OCTO_ASSIGN_OR_RETURN(weights_[l], BindLayerWeights(manifest_.config, file, memory->as<uint8_t>()));
    held += file.size;
    vram_[l] = std::move(*memory);
    SetHeld(held + (same_staging ? want_slots * staging_bytes : 0));
  }
  // 3. Staging buffers for the rest.
  if (!same_staging) {
    slots_.resize(want_slots);
    for (Slot& s : slots_) {
      OCTO_RETURN_IF_ERROR(NewEvent(&s.slot_free));
      OCTO_RETURN_IF_ERROR(NewEvent(&s.experts_copied));
      absl::StatusOr<BackendBuffer> memory = backend_.Allocate(staging_bytes);
      if (!memory.ok()) return Annotate(memory.status(), "a staging buffer");
      s.memory = std::move(*memory);
      held += staging_bytes;
      SetHeld(held);
    }
  } else {
    held += want_slots * staging_bytes;
  }
  OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaStreamSynchronize(backend_.stream()), "clearing device buffers"));
  plan_ = plan;
  order_ = std::move(order);
  cursor_ = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.vram_layers = static_cast<uint32_t>(std::count(plan.in_vram.begin(), plan.in_vram.end(), true));
    stats_.staging_buffers = want_slots;
    stats_.staging_bytes = staging_bytes;
  }
  SetHeld(held);
  return Pin();
}

int DeviceLayers::SlotOf(uint32_t layer) const {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].layer == layer && slots_[i].state != Slot::kFree) return static_cast<int>(i);
  }
  return -1;
}

void DeviceLayers::HarvestCopy(uint32_t layer, EventSet& set) {
  if (!set.copy_pending) return;
  set.copy_pending = false;
  const double seconds = Elapsed(set.copy_start, set.copy_done);
  std::lock_guard<std::mutex> lock(mu_);
  timings_[layer].timed_copies++;
  timings_[layer].copy_seconds += seconds;
  stats_.copy_seconds += seconds;
  stats_.timed_copied_bytes += set.copy_bytes;
}

void DeviceLayers::HarvestCompute(uint32_t layer, EventSet& set) {
  if (!set.compute_pending) return;
  set.compute_pending = false;
  const double compute = Elapsed(set.start, set.end);
  const double wait = set.waited ? Elapsed(set.gap_start, set.start) : 0;
  std::lock_guard<std::mutex> lock(mu_);
  timings_[layer].timed_passes++;
  timings_[layer].compute_seconds += compute;
  timings_[layer].wait_seconds += wait;
  stats_.wait_seconds += wait;
}

// Gives back the host bytes of every layer whose copy has landed.
void DeviceLayers::PollCopies() {
  bool not_ready = false;  // cudaErrorNotReady from a query is not an error, but is the last one
  auto done = [&not_ready](cudaEvent_t event) {
    if (cudaEventQuery(event) == cudaSuccess) return true;
    not_ready = true;
    return false;
  };
  for (Slot& s : slots_) {
    if (!s.host_held || s.keep_host || !done(s.copy_done)) continue;
    host_.ReleaseBytes(s.layer);
    s.host_held = false;
  }
  std::erase_if(pending_, [&](const PendingBytes& p) {
    if (!done(p.copied)) return false;
    host_.ReleaseBytes(p.layer);
    return true;
  });
  if (not_ready) cudaGetLastError();
}

void DeviceLayers::GiveBackLater(Slot& slot) {
  if (!slot.host_held) return;
  if (cudaEventQuery(slot.copy_done) == cudaSuccess) {
    host_.ReleaseBytes(slot.layer);
  } else {
    cudaGetLastError();
    pending_.push_back(PendingBytes{slot.layer, slot.copy_done, slot.host_from_disk});
  }
  slot.host_held = false;
}

void DeviceLayers::SettlePending(cudaEvent_t event) {
  std::erase_if(pending_, [&](const PendingBytes& p) {
    if (p.copied != event) return false;
    cudaEventSynchronize(p.copied);  // two rounds after it was queued: long done
    host_.ReleaseBytes(p.layer);
    return true;
  });
}

// Waits for `slot`'s copy (that one event), then gives its host bytes back.
absl::Status DeviceLayers::GiveBackWhenCopied(Slot& slot) {
  if (!slot.host_held) return absl::OkStatus();
  absl::Status copied = CudaCallStatus(cudaEventSynchronize(slot.copy_done), "a layer copy");
  host_.ReleaseBytes(slot.layer);
  slot.host_held = false;
  return copied;
}

// Waits for the copy of the earliest-queued disk layer still held, and
// gives its ring slot back.
absl::Status DeviceLayers::ReleaseOldestDiskBytes() {
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {  // the oldest are the pending ones
    if (!it->from_disk) continue;
    const absl::Status copied = CudaCallStatus(cudaEventSynchronize(it->copied), "a layer copy");
    host_.ReleaseBytes(it->layer);
    pending_.erase(it);
    return copied;
  }
  for (size_t step = 0; step < order_.size(); ++step) {
    const uint32_t layer = order_[(cursor_ + step) % order_.size()];
    const int i = SlotOf(layer);
    if (i < 0 || !slots_[i].host_held || !slots_[i].host_from_disk || slots_[i].keep_host) continue;
    return GiveBackWhenCopied(slots_[i]);
  }
  return absl::FailedPreconditionError("every ring slot is held by a copy not yet queued");
}

absl::Status DeviceLayers::Queue(uint32_t layer, int slot_index) {
  Slot& slot = slots_[slot_index];
  PollCopies();
  uint32_t disk_held = 0;
  for (const Slot& s : slots_) disk_held += s.host_held && s.host_from_disk;
  for (const PendingBytes& p : pending_) disk_held += p.from_disk;
  if (disk_held >= host_.max_disk_held()) OCTO_RETURN_IF_ERROR(ReleaseOldestDiskBytes());
  OCTO_ASSIGN_OR_RETURN(const LayerBytesSource::Bytes bytes, host_.AcquireBytes(layer));
  const ManifestFile& file = *manifest_.Layer(layer);
  absl::StatusOr<LayerWeights> bound = BindLayerWeights(manifest_.config, file, slot.memory.as<uint8_t>());
  if (!bound.ok() || bytes.size > slot.memory.size()) {
    host_.ReleaseBytes(layer);
    if (!bound.ok()) return bound.status();
    return absl::InternalError(absl::StrCat("layer ", layer, " (", bytes.size, " bytes) exceeds its staging buffer"));
  }
  // A two-phase layer: its dense part now, the routed experts later.
  const bool two_phase = host_.TwoPhase(layer);
  const uint64_t copy_bytes = two_phase ? DenseRange(file).bytes : bytes.size;
  LayerEvents& le = events_[layer];
  const bool timed = le.queued % timing_every_ == 0;
  EventSet& set = le.sets[le.queued++ % 2];
  HarvestCopy(layer, set);
  SettlePending(set.copy_done);
  cudaStream_t copy = copy_stream_.get();
  if (slot.used) OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaStreamWaitEvent(copy, slot.slot_free, 0), "cudaStreamWaitEvent"));
  if (timed) OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaEventRecord(set.copy_start, copy), "cudaEventRecord"));
  OCTO_RETURN_IF_ERROR(CudaCallStatus(
      cudaMemcpyAsync(slot.memory.data(), bytes.data, copy_bytes, cudaMemcpyHostToDevice, copy),
      absl::StrCat("copying layer ", layer, " to the device")));
  OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaEventRecord(set.copy_done, copy), "cudaEventRecord"));
  set.copy_pending = timed;
  set.copy_bytes = copy_bytes;
  weights_[layer] = *bound;
  slot.layer = layer;
  slot.state = Slot::kCopying;
  slot.host_held = true;
  slot.host_from_disk = bytes.from_disk;
  slot.keep_host = two_phase;
  slot.host_data = bytes.data;
  slot.copy_done = set.copy_done;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.copied_bytes += copy_bytes;
  timings_[layer].copies++;
  return absl::OkStatus();
}

bool DeviceLayers::TwoPhase(uint32_t layer) const {
  return layer < plan_.in_vram.size() && !plan_.in_vram[layer] && host_.TwoPhase(layer);
}

absl::Status DeviceLayers::FetchExperts(uint32_t layer, const std::vector<uint32_t>& experts, bool routed) {
  if (!TwoPhase(layer)) return absl::OkStatus();
  OCTO_RETURN_IF_ERROR(host_.FetchExperts(layer, experts, routed));
  if (!routed) return absl::OkStatus();  // a prediction: the reads run on the host side
  const int i = SlotOf(layer);
  if (i < 0 || slots_[i].state != Slot::kAcquired || !slots_[i].keep_host) {
    return absl::FailedPreconditionError(absl::StrCat("layer ", layer, " is not acquired in two phases"));
  }
  Slot& slot = slots_[i];
  const ManifestFile& file = *manifest_.Layer(layer);
  // What the host source read: every block when the union was most of them.
  std::vector<ByteRange> ranges;
  if (ReadsAllExperts(experts.size(), file.experts->count)) {
    ranges.push_back({file.experts->offset, file.experts->stride * file.experts->count});
  } else {
    for (uint32_t e : experts) ranges.push_back(ExpertRange(file, e));
  }
  cudaStream_t compute = backend_.stream();
  uint64_t copied = 0;
  for (const ByteRange& r : ranges) {
    OCTO_RETURN_IF_ERROR(CudaCallStatus(
        cudaMemcpyAsync(slot.memory.as<uint8_t>() + r.offset, slot.host_data + r.offset, r.bytes,
                        cudaMemcpyHostToDevice, compute),
        absl::StrCat("copying the experts of layer ", layer, " to the device")));
    copied += r.bytes;
  }
  // The ring slot goes back once these copies are done (Release).
  SettlePending(slot.experts_copied);
  OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaEventRecord(slot.experts_copied, compute), "cudaEventRecord"));
  slot.copy_done = slot.experts_copied;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.copied_bytes += copied;
  return absl::OkStatus();
}

// Fills free slots with the next layers of the cyclic order. A failure
// stops the prefetch quietly: the Acquire that needs the layer retries it
// and reports the error.
void DeviceLayers::TopUp() {
  if (order_.empty()) return;
  for (;;) {
    int free_slot = -1;
    for (size_t i = 0; i < slots_.size() && free_slot < 0; ++i) {
      if (slots_[i].state == Slot::kFree) free_slot = static_cast<int>(i);
    }
    if (free_slot < 0) return;
    const uint32_t next = order_[cursor_ % order_.size()];
    if (SlotOf(next) >= 0) return;  // the whole order is in flight
    if (!Queue(next, free_slot).ok()) return;
    cursor_ = (cursor_ + 1) % order_.size();
  }
}

absl::StatusOr<const LayerWeights*> DeviceLayers::Acquire(uint32_t layer) {
  if (layer >= weights_.size()) return absl::InvalidArgumentError(absl::StrCat("layer ", layer, " of ", weights_.size()));
  if (acquired_ != kNoLayer) {
    return absl::FailedPreconditionError(absl::StrCat("layer ", layer, " acquired before layer ", acquired_,
                                                      " was released"));
  }
  LayerEvents& le = events_[layer];
  // A resident layer's events would end the pass's CUDA graph (CudaBackend):
  // with graphs on, it is timed in one use of kGraphedTimingFactor times as
  // many (unless every use is asked for), so a graphed decode token stays a
  // few host calls on average.
  const uint32_t every = timing_every_;
  const bool sparse = plan_.in_vram[layer] && backend_.graphs_enabled() && every > 1;
  const bool timed = le.acquired % (sparse ? every * kGraphedTimingFactor : every) == 0;
  // Events and waits on the compute stream: only for a timed pass or a
  // streamed layer (asking for the stream ends the pass's graph recording,
  // CudaBackend).
  const bool on_stream = timed || !plan_.in_vram[layer];
  cudaStream_t compute = on_stream ? backend_.stream() : nullptr;
  EventSet& set = le.sets[le.acquired++ % 2];
  HarvestCompute(layer, set);
  set.waited = false;
  set.timed = timed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    timings_[layer].passes++;
  }
  if (!plan_.in_vram[layer]) {
    int i = SlotOf(layer);
    if (i < 0) {
      // Not prefetched (the first pass, or after an error): restart the cycle here.
      const auto it = std::find(order_.begin(), order_.end(), layer);
      if (it == order_.end()) return absl::InternalError(absl::StrCat("layer ", layer, " has no tier"));
      // What was prefetched is for another point of the cycle (a pass that
      // failed part way): drop it, giving its host bytes back once copied.
      for (Slot& slot : slots_) {
        if (slot.state != Slot::kCopying) continue;
        slot.keep_host = false;
        GiveBackLater(slot);
        slot.state = Slot::kFree;
        slot.layer = kNoLayer;
      }
      for (size_t s = 0; s < slots_.size() && i < 0; ++s) {
        if (slots_[s].state == Slot::kFree) i = static_cast<int>(s);
      }
      if (i < 0) return absl::InternalError("every staging buffer is in use");
      OCTO_RETURN_IF_ERROR(Queue(layer, i));
      cursor_ = (static_cast<size_t>(it - order_.begin()) + 1) % order_.size();
    }
    slots_[i].state = Slot::kAcquired;
    const auto ahead = static_cast<uint32_t>(
        std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.state == Slot::kCopying; }));
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<uint64_t>& by_ahead = stats_.acquires_by_copies_ahead;
      if (by_ahead.size() <= ahead) by_ahead.resize(ahead + 1, 0);
      by_ahead[ahead]++;
    }
    if (timed) OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaEventRecord(set.gap_start, compute), "cudaEventRecord"));
    OCTO_RETURN_IF_ERROR(
        CudaCallStatus(cudaStreamWaitEvent(compute, slots_[i].copy_done, 0), "waiting for a layer copy"));
    set.waited = timed;
  }
  if (timed) OCTO_RETURN_IF_ERROR(CudaCallStatus(cudaEventRecord(set.start, compute), "cudaEventRecord"));
  PollCopies();
  acquired_ = layer;
  return &weights_[layer];
}

void DeviceLayers::Release(uint32_t layer) {
  if (layer != acquired_) return;
  acquired_ = kNoLayer;
  LayerEvents& le = events_[layer];
  EventSet& set = le.sets[(le.acquired - 1) % 2];
  cudaStream_t compute = set.timed || !plan_.in_vram[layer] ? backend_.stream() : nullptr;
  set.compute_pending = set.timed && cudaEventRecord(set.end, compute) == cudaSuccess;
  if (!plan_.in_vram[layer]) {
    const int i = SlotOf(layer);
    if (i >= 0) {
      cudaEventRecord(slots_[i].slot_free, compute);
      slots_[i].used = true;
      slots_[i].state = Slot::kFree;
      slots_[i].keep_host = false;
      GiveBackLater(slots_[i]);  // a copy still in flight: given back when PollCopies sees it done
      slots_[i].layer = kNoLayer;
    }
  }
  TopUp();
}

DeviceLayersStats DeviceLayers::Stats() {
  std::lock_guard<std::mutex> lock(mu_);
  DeviceLayersStats s = stats_;
  s.timing_every = timing_every_;
  return s;
}

void DeviceLayers::SetTimingEvery(uint32_t n) { timing_every_ = n < 1 ? 1 : n; }

std::vector<DeviceLayerTiming> DeviceLayers::LayerTimings() {
  std::lock_guard<std::mutex> lock(mu_);
  return timings_;
}

}  // namespace octo
