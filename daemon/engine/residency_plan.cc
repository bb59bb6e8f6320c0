#include "daemon/engine/residency_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace octo {

std::vector<uint32_t> LayerPlan::StreamedOrder() const {
  std::vector<uint32_t> order;
  for (uint32_t l = 0; l < resident.size(); ++l) {
    if (!resident[l]) order.push_back(l);
  }
  return order;
}

namespace {

// Fills `plan` (pinned layers already resident) with `slots` ring slots and
// then more resident layers, outermost first. Returns the streamed count.
size_t Fill(const std::vector<uint64_t>& layer_bytes, uint64_t budget, uint32_t slots, uint64_t slot_bytes,
            uint64_t cache_bytes, LayerPlan& plan) {
  const size_t n = layer_bytes.size();
  uint64_t held = slots * slot_bytes + cache_bytes;
  for (size_t l = 0; l < n; ++l) {
    plan.resident[l] = plan.pinned[l];
    if (plan.pinned[l]) held += layer_bytes[l];
  }
  for (size_t i = 0; i < n; ++i) {
    const size_t layer = (i % 2 == 0) ? i / 2 : n - 1 - i / 2;  // 0, n-1, 1, n-2, ...
    if (plan.resident[layer] || held + layer_bytes[layer] > budget) continue;
    held += layer_bytes[layer];
    plan.resident[layer] = true;
  }
  plan.ring_slots = slots;
  plan.slot_bytes = slot_bytes;
  plan.expert_cache_bytes = cache_bytes;
  plan.held_bytes = held;
  return static_cast<size_t>(std::count(plan.resident.begin(), plan.resident.end(), false));
}

}  // namespace

absl::StatusOr<LayerPlan> PlanLayers(const std::vector<uint64_t>& layer_bytes, const ResidencySettings& settings) {
  if (settings.ring_slots < 1 || settings.ring_slots > kMaxRingSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring_slots is ", settings.ring_slots, "; it must be 1..", kMaxRingSlots));
  }
  const uint64_t budget = settings.budget();
  if (budget == 0) return absl::InvalidArgumentError("the layer budget is 0 bytes");
  const size_t n = layer_bytes.size();
  LayerPlan plan;
  plan.resident.assign(n, true);
  plan.pinned.assign(n, false);
  uint64_t total = 0;
  uint64_t pinned_bytes = 0;
  uint64_t largest_unpinned = 0;
  for (size_t l = 0; l < n; ++l) {
    total += layer_bytes[l];
    plan.pinned[l] = l < settings.pin_first || l + settings.pin_last >= n;
    if (plan.pinned[l]) {
      pinned_bytes += layer_bytes[l];
    } else {
      largest_unpinned = std::max(largest_unpinned, layer_bytes[l]);
    }
  }
  if (total <= budget) {
    plan.held_bytes = total;
    return plan;
  }
  if (pinned_bytes + largest_unpinned > budget) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a layer budget of ", budget, " bytes cannot hold the pinned layers (", settings.pin_first, " first, ",
        settings.pin_last, " last: ", pinned_bytes, " bytes) and one ring slot (", largest_unpinned,
        " bytes); raise the budget or pin fewer layers"));
  }
  // The most slots that fit, but no more than there are layers left to stream.
  uint32_t slots = settings.ring_slots;
  while (slots > 1 && pinned_bytes + slots * largest_unpinned > budget) --slots;
  const uint64_t left = budget - pinned_bytes - slots * largest_unpinned;
  uint64_t cache = 0;
  if (settings.experts_streamed) {
    cache = settings.expert_cache_bytes == kAutoExpertCache ? left / 2 : settings.expert_cache_bytes;
    if (cache > left) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "an expert cache of ", cache, " bytes does not fit the layer budget of ", budget, " bytes beside the pinned layers (",
          pinned_bytes, " bytes) and the ring (", slots, " x ", largest_unpinned, " bytes): at most ", left));
    }
  }
  while (true) {
    const size_t streamed = Fill(layer_bytes, budget, slots, largest_unpinned, cache, plan);
    if (streamed >= slots || slots == 1) break;
    slots = static_cast<uint32_t>(std::max<size_t>(streamed, 1));
  }
  return plan;
}

}  // namespace octo
