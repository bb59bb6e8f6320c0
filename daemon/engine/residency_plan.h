// Which layers stay resident and how big the staging ring is, under a byte
// budget. Pure arithmetic, so the rules are tested alone.
//
// The budget counts layer memory: resident layers plus ring slots (the
// whole-model tensors -- embeddings, lm_head, final norm -- are always
// resident and counted apart). Rules, in order:
//   1. everything fits: every layer resident, no ring;
//   2. the first pin_first and last pin_last layers are resident ("pinned");
//      with at least one ring slot beside them, or RESOURCE_EXHAUSTED;
//   3. the ring gets up to ring_slots slots, each the size of the largest
//      layer that may stream (never more slots than streamed layers);
//   4. when layers stream their experts selectively (two-phase MoE layers),
//      the expert cache gets its share: expert_cache_bytes, or with
//      kAutoExpertCache half of what the pins and the ring leave;
//   5. what is left fills with more resident layers, outermost first
//      (0, n-1, 1, n-2, ...): the layers a pass needs first and last.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace octo {

inline constexpr uint32_t kMaxRingSlots = 16;
// expert_cache_bytes: half of the budget the pinned layers and the ring leave.
inline constexpr uint64_t kAutoExpertCache = ~uint64_t{0};

struct ResidencySettings {
  uint32_t pin_first = 1;
  uint32_t pin_last = 1;
  bool auto_budget = true;        // budget = auto_budget_bytes
  uint64_t budget_bytes = 0;      // used when !auto_budget
  uint64_t auto_budget_bytes = 0; // what auto mode may fill
  uint32_t ring_slots = 2;        // wanted, 1..kMaxRingSlots (2 = double buffering)
  uint64_t expert_cache_bytes = kAutoExpertCache;  // rule 4
  bool experts_streamed = false;  // the model has two-phase layers (set by the residency manager)

  uint64_t budget() const { return auto_budget ? auto_budget_bytes : budget_bytes; }
};

struct LayerPlan {
  std::vector<bool> resident;  // by layer
  std::vector<bool> pinned;    // by layer; pinned implies resident
  uint32_t ring_slots = 0;     // 0 when nothing streams
  uint64_t slot_bytes = 0;
  uint64_t expert_cache_bytes = 0;  // the expert cache's capacity (rule 4)
  uint64_t held_bytes = 0;     // resident layers + ring + expert cache, <= budget

  std::vector<uint32_t> StreamedOrder() const;  // streamed layers, ascending
  uint64_t ring_bytes() const { return ring_slots * slot_bytes; }
};

// INVALID_ARGUMENT for bad settings (ring_slots out of range, a zero
// budget), RESOURCE_EXHAUSTED naming the sizes when the pinned layers and
// one slot do not fit.
absl::StatusOr<LayerPlan> PlanLayers(const std::vector<uint64_t>& layer_bytes, const ResidencySettings& settings);

}  // namespace octo
