// The residency rules (residency_plan.h), one per test.
#include "daemon/engine/residency_plan.h"

#include <gtest/gtest.h>

namespace octo {
namespace {

ResidencySettings Budget(uint64_t bytes, uint32_t pin_first = 1, uint32_t pin_last = 1, uint32_t slots = 2) {
  return ResidencySettings{.pin_first = pin_first, .pin_last = pin_last, .auto_budget = false,
                           .budget_bytes = bytes, .ring_slots = slots};
}

TEST(ResidencyPlanTest, EverythingFitsMeansNoRing) {
  auto plan = PlanLayers({10, 10, 10}, Budget(30));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->ring_slots, 0u);
  EXPECT_EQ(plan->held_bytes, 30u);
  EXPECT_TRUE(plan->StreamedOrder().empty());
}

TEST(ResidencyPlanTest, PinnedLayersPlusTwoSlotsThenOutermostFirst) {
  // 8 layers of 10: pinned 0 and 7 (20) + 2 slots (20) = 40; 60 leaves 20: layers 1 and 6.
  auto plan = PlanLayers(std::vector<uint64_t>(8, 10), Budget(60));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->ring_slots, 2u);
  EXPECT_EQ(plan->StreamedOrder(), (std::vector<uint32_t>{2, 3, 4, 5}));
  EXPECT_TRUE(plan->pinned[0] && plan->pinned[7] && !plan->pinned[1]);
  EXPECT_EQ(plan->held_bytes, 60u);
}

TEST(ResidencyPlanTest, OneLayerBudgetStreamsEverythingThroughOneSlot) {
  auto plan = PlanLayers(std::vector<uint64_t>(4, 10), Budget(10, 0, 0));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->ring_slots, 1u);
  EXPECT_EQ(plan->StreamedOrder().size(), 4u);
  EXPECT_EQ(plan->held_bytes, 10u);
}

TEST(ResidencyPlanTest, EveryBudgetIsRespectedAndSlotsNeverOutnumberStreamedLayers) {
  const std::vector<uint64_t> sizes = {14, 10, 10, 9, 10, 10, 3, 12};
  for (uint32_t slots = 1; slots <= 4; ++slots) {
    for (uint64_t budget = 0; budget <= 80; ++budget) {
      auto plan = PlanLayers(sizes, Budget(budget, 1, 1, slots));
      if (!plan.ok()) {
        EXPECT_TRUE(budget == 0 || budget < 14 + 12 + 10) << budget;
        continue;
      }
      uint64_t held = plan->ring_slots * plan->slot_bytes;
      for (size_t l = 0; l < sizes.size(); ++l) held += plan->resident[l] ? sizes[l] : 0;
      EXPECT_EQ(held, plan->held_bytes);
      EXPECT_LE(held, budget);
      EXPECT_TRUE(plan->resident[0] && plan->resident[7]);
      const size_t streamed = plan->StreamedOrder().size();
      EXPECT_LE(plan->ring_slots, std::max<size_t>(streamed, 1)) << budget;
      EXPECT_LE(plan->ring_slots, slots);
      if (streamed > 0) {
        EXPECT_GE(plan->ring_slots, 1u);
      }
      for (uint32_t l : plan->StreamedOrder()) EXPECT_LE(sizes[l], plan->slot_bytes);
    }
  }
}

TEST(ResidencyPlanTest, BudgetBelowPinnedPlusOneSlotIsRefusedWithTheSizes) {
  auto plan = PlanLayers(std::vector<uint64_t>(6, 10), Budget(25, 1, 1));
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("20 bytes"), std::string::npos) << plan.status();
}

TEST(ResidencyPlanTest, BadSettingsAreInvalid) {
  EXPECT_EQ(PlanLayers({10}, Budget(0)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanLayers({10}, Budget(10, 1, 1, 0)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanLayers({10}, Budget(10, 1, 1, kMaxRingSlots + 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ResidencyPlanTest, AutoUsesTheAutoBudget) {
  ResidencySettings s{.pin_first = 0, .pin_last = 0, .auto_budget = true, .budget_bytes = 1,
                      .auto_budget_bytes = 100, .ring_slots = 2};
  auto plan = PlanLayers(std::vector<uint64_t>(4, 10), s);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->ring_slots, 0u);
}

}  // namespace
}  // namespace octo
