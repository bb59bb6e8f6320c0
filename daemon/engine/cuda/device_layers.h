// DeviceLayers: the forward pass's LayerSource on the CUDA backend -- the
// three tiers seen from the GPU.
//
//   VRAM tier: layers read (and checksummed) once at load, copied to device
//              memory and kept there.
//   host/disk: every other layer comes from a LayerBytesSource (the host
//              tier's pinned buffers, or octo-loader's ring) and is copied
//              into one of `staging_buffers` device buffers, on a copy stream
//              of its own, while the compute stream runs earlier layers.
//
// The pipeline, with S staging buffers, in the cyclic order of the non-VRAM
// layers (the next pass's first ones follow the last):
//   - Release(layer) records "slot free" on the compute stream and queues
//     the next layers of the order into free slots: AcquireBytes (may wait
//     for the loader), then on the copy stream: wait "slot free" of that
//     slot's previous layer, memcpy, record "copy done". So up to S - 1
//     layers are in flight ahead of the one computing: the prefetch depth.
//   - Acquire(layer) makes the compute stream wait for that slot's "copy
//     done" (cudaStreamWaitEvent: no host wait) and binds the views over
//     the staging buffer.
//   - A layer's host bytes (a ring slot) go back as soon as its copy is
//     done: polled with cudaEventQuery at every Acquire/Release/Queue, and
//     waited for (that one event) only when the ring has no free slot. A
//     staging buffer released before its copy is seen done keeps the bytes
//     on a pending list (layer and copy-done event) rather than waiting, so
//     the forward thread does not block to give them back.
// There is no device-wide synchronise in the loop; the pass's one wait is
// the logits' download.
//
// Timing, from events: per layer the copy (copy start .. copy done), the
// wait (the compute stream's gap before the layer: end of the previous
// layer .. start of this one) and the compute (start .. end). Read back the
// next time the layer comes round, or by Stats(), once the events are done.
// Only one use of a layer in timing_every() (kLayerTimingEvery unless set)
// is timed, the first among them: the others record no timing events and
// read none back, which saves host calls on every other pass. The counts
// of copies and passes cover every use; the seconds the timed ones, with
// their own counts beside them. With CUDA graphs on (CudaBackend), a
// resident layer is timed in one use of kGraphedTimingFactor * timing_every
// (timing_every 1 still times every use):
// its events end the pass's graph recording. Asking for the compute stream
// (events, copies) is left to timed uses and streamed layers for that reason.
//
// Threading: Acquire/Release/Apply from the forward pass's thread;
// Stats/LayerStats from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "daemon/engine/backend_setup.h"
#include "daemon/engine/cuda/cuda_backend.h"
#include "daemon/engine/layer_source.h"
#include "storage/manifest.h"

namespace octo {

struct DeviceLayersPlan {
  std::vector<bool> in_vram;     // by layer
  uint32_t staging_buffers = 2;  // >= 1 when any layer is not in VRAM
};

struct DeviceLayerTiming {
  uint64_t copies = 0, passes = 0;              // every use
  uint64_t timed_copies = 0, timed_passes = 0;  // the timed ones, read back
  double copy_seconds = 0, wait_seconds = 0, compute_seconds = 0;  // sums over the timed ones
};

struct DeviceLayersStats {
  uint64_t held_bytes = 0, peak_bytes = 0;  // VRAM layers + staging
  uint32_t vram_layers = 0;
  uint32_t staging_buffers = 0;
  uint64_t staging_bytes = 0;               // each
  uint64_t copied_bytes = 0;                // host -> device layer copies
  uint64_t timed_copied_bytes = 0;          // of them, the timed ones read back
  double copy_seconds = 0;                  // their event time, summed
  double wait_seconds = 0;                  // compute-stream gaps before timed streamed layers, summed
  uint32_t timing_every = kLayerTimingEvery;
  // The prefetch achieved: [k] counts the acquires of a layer not in VRAM
  // that found k later layers' copies already queued behind it.
  std::vector<uint64_t> acquires_by_copies_ahead;
  // Host layer memory cudaHostRegister refused (copied as pageable), and
  // the first refusal's error; since the last plan.
  uint64_t unpinned_bytes = 0;
  std::string pin_error;
};

class DeviceLayers : public LayerSource {
 public:
  // `host` and `backend` must outlive this. Reads the VRAM layers from
  // model_dir. RESOURCE_EXHAUSTED naming the sizes when the device cannot
  // hold them; DATA_LOSS for a damaged file.
  static absl::StatusOr<std::unique_ptr<DeviceLayers>> Create(CudaBackend& backend, const Manifest& manifest,
                                                              const std::string& model_dir, LayerBytesSource& host,
                                                              const DeviceLayersPlan& plan);
  ~DeviceLayers() override;

  // Between passes: finishes every copy, gives all host bytes back and
  // unpins the host memory (call before the host source re-plans).
  absl::Status Drain();
  // Moves to `plan` (frees what it drops first, then allocates), and pins
  // the host source's regions anew. On error the device holds a subset of
  // both plans; Apply again.
  absl::Status Apply(const DeviceLayersPlan& plan);

  absl::StatusOr<const LayerWeights*> Acquire(uint32_t layer) override;
  void Release(uint32_t layer) override;
  // Two-phase layers (a disk-tier MoE layer the host source reads in two
  // phases): only the dense part is copied ahead; FetchExperts has the host
  // source read the routed experts into the layer's ring slot, then copies
  // their blocks into the staging buffer on the compute stream, before the
  // expert matmuls. The ring slot is held until that copy is done.
  bool TwoPhase(uint32_t layer) const override;
  absl::Status FetchExperts(uint32_t layer, const std::vector<uint32_t>& experts, bool routed) override;

  DeviceLayersStats Stats();
  std::vector<DeviceLayerTiming> LayerTimings();
  // Times one use of each layer in `n` (>= 1; 1: every use).
  void SetTimingEvery(uint32_t n);

 private:
  struct Slot {
    uint32_t layer = kNoLayer;
    enum State { kFree, kCopying, kAcquired } state = kFree;
    bool host_held = false;       // the host bytes are held until the copy is done
    bool host_from_disk = false;
    bool used = false;            // slot_free has been recorded
    bool keep_host = false;       // a two-phase layer: its host bytes are held until Release
    const uint8_t* host_data = nullptr;  // the host bytes, while held
    cudaEvent_t copy_done = nullptr;  // the layer's last copy, for this round
    cudaEvent_t slot_free = nullptr;  // the slot's last layer finished computing
    cudaEvent_t experts_copied = nullptr;  // a two-phase layer's expert blocks are on the device
    BackendBuffer memory;
  };
  // A layer's events for one round (a use of it). Two sets per layer, used
  // in turn: a set is reused two rounds later, when the pass that used it
  // has ended (each pass ends waiting for its logits), so reading its times
  // back never waits.
  struct EventSet {
    cudaEvent_t copy_start = nullptr, copy_done = nullptr;
    cudaEvent_t gap_start = nullptr, start = nullptr, end = nullptr;
    bool copy_pending = false, compute_pending = false, waited = false;
    bool timed = false;       // this use records its timing events
    uint64_t copy_bytes = 0;  // the timed copy's bytes
  };
  struct LayerEvents {
    EventSet sets[2];
    uint64_t queued = 0, acquired = 0;  // rounds so far
  };

  DeviceLayers(CudaBackend& backend, const Manifest& manifest, std::string model_dir, LayerBytesSource& host);
  void PollCopies();
  absl::Status GiveBackWhenCopied(Slot& slot);
  // Gives `slot`'s host bytes back now if its copy is done, else puts them
  // on pending_ (no wait).
  void GiveBackLater(Slot& slot);
  // Waits for the pending give-back recorded on `event`, if any (before the
  // event is recorded again).
  void SettlePending(cudaEvent_t event);
  absl::Status ReleaseOldestDiskBytes();
  absl::Status Queue(uint32_t layer, int slot);
  void TopUp();
  int SlotOf(uint32_t layer) const;
  void HarvestCopy(uint32_t layer, EventSet& set);
  void HarvestCompute(uint32_t layer, EventSet& set);
  absl::Status Pin();
  void Unpin();
  void SetHeld(uint64_t held);

  CudaBackend& backend_;
  const Manifest& manifest_;
  std::string model_dir_;
  LayerBytesSource& host_;
  cuda::CudaStream copy_stream_;

  DeviceLayersPlan plan_;
  std::vector<BackendBuffer> vram_;  // by layer
  std::vector<LayerWeights> weights_;
  std::vector<uint32_t> order_;      // non-VRAM layers, ascending
  size_t cursor_ = 0;                // order_ index of the next layer to queue
  std::vector<Slot> slots_;
  std::vector<LayerEvents> events_;  // by layer
  std::vector<const void*> pinned_;  // host regions we registered
  struct PendingBytes {
    uint32_t layer;
    cudaEvent_t copied;  // the copy's event (a layer's EventSet, or a slot's experts_copied)
    bool from_disk;
  };
  std::vector<PendingBytes> pending_;  // host bytes to give back once copied, oldest first
  uint32_t acquired_ = kNoLayer;
  std::atomic<uint32_t> timing_every_{kLayerTimingEvery};
  static constexpr uint32_t kGraphedTimingFactor = 16;

  std::mutex mu_;
  DeviceLayersStats stats_ ABSL_GUARDED_BY(mu_);
  std::vector<DeviceLayerTiming> timings_ ABSL_GUARDED_BY(mu_);
};

}  // namespace octo
