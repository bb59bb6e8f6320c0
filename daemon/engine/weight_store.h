// WeightStore: the weights of one model directory, in this process.
//
// Opens a layer directory (manifest.json + files), keeps the whole-model
// tensors (embedding, lm_head, final norm, rope factors) resident, and
// serves the layers under a byte budget:
//   - layers that fit stay resident, chosen first and last layers first
//     (layer 0, layer n-1, layer 1, layer n-2, ...), read once at Open;
//   - the rest are read per pass into one staging buffer the size of the
//     largest streamed layer, when the forward pass acquires them.
// Every read is checked against the manifest's xxh64 checksum (DATA_LOSS on
// a mismatch), so a bad disk block cannot become wrong tokens.
//
// The budget counts layer bytes held at once: resident layers plus the
// staging buffer. Whole-model tensors are outside it. A budget too small for
// one layer is RESOURCE_EXHAUSTED at Open.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/engine/aligned_buffer.h"
#include "daemon/engine/layer_source.h"
#include "daemon/engine/layer_weights.h"
#include "daemon/engine/model_files.h"
#include "storage/manifest.h"

namespace octo {

inline constexpr uint64_t kUnlimitedBudget = std::numeric_limits<uint64_t>::max();

struct WeightStoreOptions {
  uint64_t layer_budget_bytes = kUnlimitedBudget;  // see the header comment
};

// Which layers stay resident under `budget`, and the staging buffer size
// (0 when every layer fits). layer_bytes[i] is layer i's file size.
struct ResidencyPlan {
  std::vector<bool> resident;
  uint64_t staging_bytes = 0;
  uint64_t held_bytes = 0;  // resident bytes + staging_bytes, <= budget
};
absl::StatusOr<ResidencyPlan> PlanResidency(const std::vector<uint64_t>& layer_bytes, uint64_t budget);

class WeightStore : public LayerSource, public LayerBytesSource {
 public:
  // Reads and checks the manifest and the resident files. Errors name the
  // file: NOT_FOUND/INVALID_ARGUMENT for a missing or malformed directory,
  // DATA_LOSS for a checksum mismatch, RESOURCE_EXHAUSTED for the budget.
  static absl::StatusOr<std::unique_ptr<WeightStore>> Open(const std::string& dir,
                                                           const WeightStoreOptions& options);

  const Manifest& manifest() const { return manifest_; }
  const ModelConfig& config() const { return manifest_.config; }
  const GlobalWeights& globals() const { return globals_.weights(); }
  const ResidencyPlan& plan() const { return plan_; }
  bool IsResident(uint32_t layer) const { return plan_.resident[layer]; }
  // Bytes read from layer files by Acquire since Open (streamed layers).
  uint64_t streamed_bytes() const { return streamed_bytes_; }

  absl::StatusOr<const LayerWeights*> Acquire(uint32_t layer) override;
  void Release(uint32_t layer) override;

  // For a device backend: a resident layer's buffer, or a streamed layer read
  // into the one staging buffer (so one disk layer at a time).
  absl::StatusOr<Bytes> AcquireBytes(uint32_t layer) override;
  void ReleaseBytes(uint32_t layer) override { Release(layer); }
  uint32_t max_disk_held() const override { return 1; }
  std::vector<std::pair<const void*, size_t>> HostRegions() const override;

 private:
  WeightStore() = default;

  std::string dir_;
  Manifest manifest_;
  ResidencyPlan plan_;
  ResidentGlobals globals_;
  std::vector<AlignedBuffer> resident_buffers_;  // by layer; empty when streamed
  std::vector<LayerWeights> resident_weights_;   // by layer; bound when resident
  AlignedBuffer staging_;                        // the streamed layer's bytes
  LayerWeights staged_weights_;
  uint32_t staged_layer_ = kNoLayer;             // acquired and not yet released
  uint64_t streamed_bytes_ = 0;
};

}  // namespace octo
