#include "storage/xxhash64.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace octo {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

// Expected values from the reference xxh64sum (xxhash 0.8) on the same bytes.
TEST(Xxh64Test, MatchesReferenceVectors) {
  EXPECT_EQ(Xxh64Hash(Bytes("")), 0xef46db3751d8e999ull);
  EXPECT_EQ(Xxh64Hash(Bytes("abc")), 0x44bc2cf5ad770999ull);
  EXPECT_EQ(Xxh64Hash(Bytes(std::string(1000, 'a'))), 0x56e43b712eda4223ull);
  std::vector<uint8_t> pattern(100003);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>(i * 7 + 3);
  EXPECT_EQ(Xxh64Hash(pattern), 0x924a64f3ae9ea839ull);
}

TEST(Xxh64Test, IncrementalEqualsOneShotForAnySplit) {
  std::mt19937 rng(7);
  std::vector<uint8_t> data(5000);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const uint64_t want = Xxh64Hash(data);
  for (int trial = 0; trial < 200; ++trial) {
    Xxh64 h;
    size_t pos = 0;
    while (pos < data.size()) {
      const size_t n = std::min<size_t>(rng() % 70, data.size() - pos);
      h.Update(std::span(data).subspan(pos, n));
      pos += n;
    }
    ASSERT_EQ(h.Digest(), want) << "trial " << trial;
  }
}

TEST(Xxh64Test, FormatsAsManifestChecksum) {
  EXPECT_EQ(FormatChecksum(0xef46db3751d8e999ull), "xxh64:ef46db3751d8e999");
  EXPECT_EQ(FormatChecksum(0x1ull), "xxh64:0000000000000001");
}

}  // namespace
}  // namespace octo
