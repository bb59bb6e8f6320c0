// ExpertCache: the hot experts stay, within the capacity, by use counts
// with recency among equals.
#include "daemon/core/expert_cache.h"

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace octo {
namespace {

constexpr uint64_t kBlock = 4096;

std::vector<uint8_t> Block(uint8_t fill) { return std::vector<uint8_t>(kBlock, fill); }

// Routes (layer, expert) once and offers its block when it missed, as the
// residency manager does after a read.
bool Route(ExpertCache& cache, uint32_t layer, uint32_t expert) {
  if (cache.Use(layer, expert) != nullptr) return true;
  const std::vector<uint8_t> bytes = Block(static_cast<uint8_t>(layer * 16 + expert));
  cache.Offer(layer, expert, bytes.data(), bytes.size());
  return false;
}

TEST(ExpertCacheTest, HitsReturnTheBlockThatWasOffered) {
  ExpertCache cache(4 * kBlock);
  EXPECT_FALSE(Route(cache, 1, 3));
  const uint8_t* hit = cache.Use(1, 3);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit[0], 1 * 16 + 3);
  EXPECT_EQ(hit[kBlock - 1], 1 * 16 + 3);
  EXPECT_EQ(cache.Use(2, 3), nullptr) << "experts are per layer";
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().misses, 2u);
}

TEST(ExpertCacheTest, NeverHoldsMoreThanItsCapacity) {
  ExpertCache cache(3 * kBlock);
  for (uint32_t i = 0; i < 50; ++i) {
    Route(cache, i % 4, (i * 7) % 11);
    EXPECT_LE(cache.stats().held_bytes, 3 * kBlock);
  }
  EXPECT_EQ(cache.stats().entries, 3u);
  ExpertCache none(kBlock - 1);
  EXPECT_FALSE(Route(none, 0, 0));
  EXPECT_FALSE(Route(none, 0, 0));
  EXPECT_EQ(none.stats().entries, 0u) << "a block larger than the cache is never kept";
}

TEST(ExpertCacheTest, FrequentExpertsStayAndRareOnesDoNotEvictThem) {
  ExpertCache cache(2 * kBlock);
  for (int i = 0; i < 5; ++i) {
    Route(cache, 0, 1);
    Route(cache, 0, 2);
  }
  // Experts used once each pass by: they must not push out 1 and 2.
  for (uint32_t e = 3; e < 10; ++e) EXPECT_FALSE(Route(cache, 0, e));
  EXPECT_TRUE(Route(cache, 0, 1));
  EXPECT_TRUE(Route(cache, 0, 2));
  EXPECT_EQ(cache.stats().evictions, 0u);
}

TEST(ExpertCacheTest, AmongEquallyUsedTheLeastRecentGoes) {
  ExpertCache cache(2 * kBlock);
  Route(cache, 0, 1);
  Route(cache, 0, 2);
  Route(cache, 0, 3);  // as often used as 1 and 2: replaces 1, the least recent
  EXPECT_EQ(cache.Peek(0, 1), nullptr);
  EXPECT_NE(cache.Peek(0, 2), nullptr);
  EXPECT_NE(cache.Peek(0, 3), nullptr);
  EXPECT_EQ(cache.stats().evictions, 1u);
}

TEST(ExpertCacheTest, ShrinkingEvictsTheLeastUsedFirst) {
  ExpertCache cache(3 * kBlock);
  for (int i = 0; i < 3; ++i) Route(cache, 0, 7);
  Route(cache, 0, 8);
  Route(cache, 0, 9);
  cache.Resize(kBlock);
  EXPECT_EQ(cache.stats().entries, 1u);
  EXPECT_NE(cache.Peek(0, 7), nullptr);
  EXPECT_LE(cache.stats().held_bytes, kBlock);
  cache.Resize(0);
  EXPECT_EQ(cache.stats().held_bytes, 0u);
}

}  // namespace
}  // namespace octo
