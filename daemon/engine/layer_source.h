// LayerSource: where the forward pass gets each layer's weights from.
//
// The forward pass brackets every layer with Acquire(layer) ... Release(layer).
// Acquire returns views that stay valid until the matching Release: a
// resident layer's views point at memory held for the model's lifetime; a
// streamed layer's point into a staging buffer that is reused once released.
// Implementations: WeightStore (weight_store.h: resident layers plus
// synchronous reads into a staging buffer, in this process); the daemon's
// loader ring plugs in here too.
//
// Threading: one forward pass at a time calls Acquire/Release, from one
// thread. Acquire may block while the layer is read.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/engine/layer_weights.h"

namespace octo {

// A routed union covering more than this share of a two-phase layer's
// experts reads all of them in one request: prefill and large batches route
// to most experts, and one sequential read beats many small ones.
inline constexpr double kWholeLayerExpertShare = 0.5;
inline bool ReadsAllExperts(size_t routed, uint32_t n_experts) { return routed > kWholeLayerExpertShare * n_experts; }

class LayerSource {
 public:
  virtual ~LayerSource() = default;

  // The weights of `layer`. Errors: DATA_LOSS when the file's bytes do not
  // match its checksum; UNAVAILABLE/NOT_FOUND when it cannot be read; the
  // pass that asked fails with it, nothing else is affected.
  virtual absl::StatusOr<const LayerWeights*> Acquire(uint32_t layer) = 0;

  // The forward pass is done with `layer`'s views.
  virtual void Release(uint32_t layer) = 0;

  // Two-phase layers (a streamed MoE layer of a format-2 directory, see
  // storage/FORMAT.md): Acquire gives the dense part (attention, norms,
  // router, shared expert), and the pass fetches the experts it routed to
  // before the expert matmuls. Every other layer holds all its experts.
  virtual bool TwoPhase(uint32_t layer) const { return false; }
  // The acquired two-phase `layer`'s blocks of `experts` (ascending, no
  // repeats). routed: the pass needs them now; returns once they are in,
  // errors as Acquire's naming the expert. Else a prediction: starts reading
  // them and returns.
  virtual absl::Status FetchExperts(uint32_t layer, const std::vector<uint32_t>& experts, bool routed) {
    return absl::OkStatus();
  }
};

// LayerBytesSource: the host side of a device backend's layers -- each
// layer file's bytes as read (and checksummed) on the host, for the device
// source (daemon/engine/cuda/device_layers.h) to copy to the GPU. Several
// layers may be held at once: every host-tier (resident) layer, and up to
// max_disk_held() layers that are read from disk for the occasion.
class LayerBytesSource {
 public:
  struct Bytes {
    const uint8_t* data = nullptr;  // the whole file, header page included
    uint64_t size = 0;
    bool from_disk = false;         // counts against max_disk_held()
  };
  virtual ~LayerBytesSource() = default;

  // Errors as LayerSource::Acquire's.
  virtual absl::StatusOr<Bytes> AcquireBytes(uint32_t layer) = 0;
  virtual void ReleaseBytes(uint32_t layer) = 0;
  // The most disk-tier layers held at once (ring slots); >= 1.
  virtual uint32_t max_disk_held() const = 0;
  // The host memory the bytes come from (resident buffers, the ring), for
  // the device to pin (cudaHostRegister). Valid until the source re-plans.
  virtual std::vector<std::pair<const void*, size_t>> HostRegions() const = 0;

  // Two-phase layers, as LayerSource's: AcquireBytes holds the dense part
  // (storage's DenseRange of the file), and FetchExperts reads the routed
  // experts' blocks into the same bytes (at their file offsets), which stay
  // held until ReleaseBytes.
  virtual bool TwoPhase(uint32_t layer) const { return false; }
  virtual absl::Status FetchExperts(uint32_t layer, const std::vector<uint32_t>& experts, bool routed) {
    return absl::OkStatus();
  }
};

}  // namespace octo
