// ResidencyManager: the forward pass's LayerSource in octod. Resident
// layers live in this process's memory for as long as the plan keeps them;
// streamed ones come through the loader's ring (LayerStream), in the order
// the pass uses them, so the next layer loads while this one computes.
//
// It also keeps the numbers `octo-ctl status` shows: per-layer loads, load
// time, time the pass waited, compute time; bytes held and their peak.
//
// The budget is never exceeded: Apply frees what the new plan drops before
// it allocates what the new plan adds.
//
// Threading: Acquire/Release/Apply from the scheduler thread (between
// passes for Apply); Report/LayerReports/loader stats from any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "daemon/core/expert_cache.h"
#include "daemon/engine/residency_plan.h"
#include "daemon/core/runtime.h"
#include "daemon/engine/aligned_buffer.h"
#include "daemon/engine/layer_source.h"
#include "daemon/loader/layer_stream.h"
#include "storage/manifest.h"

namespace octo {

// Makes the stream for a plan (LayerStream::Start in octod; an in-process
// reader in tests).
using LayerStreamFactory = std::function<absl::StatusOr<std::unique_ptr<LayerStream>>(const LayerStreamOptions&)>;

// The prediction's reads are issued for a layer only while it names at
// least this share of the experts routed from disk there (after
// kPrefetchWarmup passes): a poor predictor would read bytes no pass uses.
inline constexpr double kMinPrefetchHitRate = 0.5;
inline constexpr uint64_t kPrefetchWarmup = 4;

// Waiting and computing time of the passes since the last TakePassTiming.
struct PassTiming {
  double load_wait_seconds = 0;
  double compute_seconds = 0;
};

class ResidencyManager : public LayerSource, public LayerBytesSource {
 public:
  // stream_options: loader path, model dir, direct I/O; slots and slot
  // bytes are the plan's. on_device: SetDeviceLayers's; selective_experts:
  // SetSelectiveExperts's. Errors as Apply.
  static absl::StatusOr<std::unique_ptr<ResidencyManager>> Create(const Manifest& manifest,
                                                                  const ResidencySettings& settings,
                                                                  const LayerStreamOptions& stream_options,
                                                                  LayerStreamFactory factory,
                                                                  std::vector<bool> on_device = {},
                                                                  bool selective_experts = true);
  ~ResidencyManager() override;

  // Re-plans under `settings` and moves layers accordingly. On an error
  // (bad settings, a budget too small, a layer that fails to read) the
  // previous plan stays in force.
  absl::Status Apply(const ResidencySettings& settings);
  // A GPU backend's VRAM tier: these layers are neither held nor streamed
  // here (by layer; empty = none). Takes effect at the next Apply.
  void SetDeviceLayers(std::vector<bool> on_device) { device_ = std::move(on_device); }
  bool on_device(uint32_t layer) const { return layer < device_.size() && device_[layer]; }

  // LayerBytesSource, for a GPU backend: host-tier layers from their
  // buffers, disk-tier ones through the ring (up to its slot count held).
  absl::StatusOr<Bytes> AcquireBytes(uint32_t layer) override;
  void ReleaseBytes(uint32_t layer) override;
  uint32_t max_disk_held() const override { return std::max<uint32_t>(plan_.ring_slots, 1); }
  std::vector<std::pair<const void*, size_t>> HostRegions() const override;

  absl::StatusOr<const LayerWeights*> Acquire(uint32_t layer) override;
  void Release(uint32_t layer) override;
  // Streamed MoE layers of a format-2 directory, when selective experts are
  // on: the dense part through the ring, then the routed experts from the
  // expert cache or the ring (FetchExperts) -- for the CPU forward pass
  // (Acquire) and for a GPU's (AcquireBytes) alike.
  bool TwoPhase(uint32_t layer) const override {
    return layer < two_phase_.size() && two_phase_[layer] && !plan_.resident[layer];
  }
  absl::Status FetchExperts(uint32_t layer, const std::vector<uint32_t>& experts, bool routed) override;
  // Selective experts on or off. Takes effect at the next Apply.
  void SetSelectiveExperts(bool on);

  PassTiming TakePassTiming();
  // When a layer was last acquired or released (the steady clock, in
  // nanoseconds since its epoch; 0 before the first): a pass in progress
  // that advances moves it. Any thread.
  int64_t last_activity_ns() const { return activity_ns_.load(std::memory_order_relaxed); }
  ResidencyReport Report() const;
  std::vector<LayerReport> LayerReports() const;
  LoaderStats loader_stats() const;
  // Fraction of the loader's time hidden behind compute, [0, 1].
  double overlap() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct LayerCounters {
    uint64_t loads = 0, passes = 0;
    double load_seconds = 0, wait_seconds = 0, compute_seconds = 0;
  };

  ResidencyManager(const Manifest& manifest, const LayerStreamOptions& stream_options, LayerStreamFactory factory);
  // The expert cache's counters into the report (after each routed fetch).
  void UpdateExpertReport() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AnyTwoPhase() const { return std::find(two_phase_.begin(), two_phase_.end(), true) != two_phase_.end(); }
  // A two-phase layer's slot, held (Acquire or AcquireBytes) for FetchExperts.
  void HoldForExperts(uint32_t layer, uint8_t* data);
  absl::Status MoveTo(const LayerPlan& plan);
  void SetHeld(uint64_t held) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Manifest& manifest_;
  LayerStreamOptions stream_options_;
  LayerStreamFactory factory_;
  std::vector<uint64_t> layer_bytes_;
  std::vector<bool> device_;  // layers the GPU holds (SetDeviceLayers)
  std::vector<bool> two_phase_;  // by layer: has expert blocks, and selective experts are on
  ExpertCache cache_;
  std::vector<uint8_t*> held_data_;      // by layer: a held two-phase layer's ring slot
  uint32_t predicted_layer_ = kNoLayer;
  std::vector<uint32_t> predicted_;       // its predicted experts (not cached)
  bool prefetch_issued_ = false;          // ... and whether they were read ahead
  struct PredictionCounts {
    uint64_t passes = 0, from_disk = 0, predicted = 0;
  };
  std::vector<PredictionCounts> prediction_;  // by layer

  ResidencySettings settings_;
  LayerPlan plan_;  // written under mu_ (reports read it), read freely on the scheduler thread
  std::vector<AlignedBuffer> resident_buffers_;  // by layer; empty when streamed
  std::vector<LayerWeights> weights_;            // by layer: bound resident or acquired streamed
  std::unique_ptr<LayerStream> stream_;
  std::atomic<int64_t> activity_ns_{0};
  void Touch() { activity_ns_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed); }
  uint32_t acquired_ = kNoLayer;
  Clock::time_point acquired_at_;
  PassTiming pass_timing_;

  mutable std::mutex mu_;
  std::vector<LayerCounters> counters_ ABSL_GUARDED_BY(mu_);
  ResidencyReport report_ ABSL_GUARDED_BY(mu_);
  LoaderStats retired_ ABSL_GUARDED_BY(mu_);  // summed over streams since replaced
  double total_wait_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  double total_load_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  ExpertReport experts_ ABSL_GUARDED_BY(mu_);
  uint64_t whole_bytes_read_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace octo
