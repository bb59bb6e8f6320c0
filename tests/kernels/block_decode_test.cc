// The block decoders the CUDA kernels run (kernels/block_decode.h), on the
// host, against the CPU backend's DequantizeRows for every type, bit for bit.
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "kernels/block_decode.h"
#include "kernels/ops.h"
#include "tests/kernels/quant_test_util.h"


namespace octo {
namespace {

using testing::RandomWeights;

// rows x cols of `type` dequantized by the CPU backend.
std::vector<float> Dequantized(GgmlType type, const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols) {
  std::vector<float> values(static_cast<size_t>(rows * cols));
  const absl::Status status = cpu::DequantizeRows(WeightMatrix{type, bytes.data(), rows, cols}, 0, rows, values.data());
  EXPECT_TRUE(status.ok()) << status;
  return values;
}

TEST(BlockDecodeTest, EveryTypeDecodesAsDequantizeRowsBitForBit) {
  constexpr int64_t kRows = 3, kCols = 512;
  for (const GgmlTypeInfo& info : AllGgmlTypes()) {
    const std::vector<uint8_t> bytes = RandomWeights(info.type, kRows, kCols, /*seed=*/7);
    const std::vector<float> want = Dequantized(info.type, bytes, kRows, kCols);
    const bool decoded = block_decode::WithDecoder(info.type, false, [&](auto decoder) {
      using D = decltype(decoder);
      EXPECT_EQ(static_cast<uint32_t>(D::kElements), info.block_size) << info.name;
      EXPECT_EQ(static_cast<uint32_t>(D::kBytes), info.type_size) << info.name;
      const int64_t row_bytes = kCols / D::kElements * D::kBytes;
      int mismatches = 0;
      for (int64_t r = 0; r < kRows; ++r) {
        for (int64_t e = 0; e < kCols; ++e) {
          const float got = D::Element(bytes.data() + r * row_bytes + e / D::kElements * D::kBytes,
                                       static_cast<int>(e % D::kElements));
          const float expected = want[static_cast<size_t>(r * kCols + e)];
          if (std::bit_cast<uint32_t>(got) != std::bit_cast<uint32_t>(expected) && ++mismatches <= 3) {
            ADD_FAILURE() << info.name << " row " << r << " element " << e << ": " << got << " vs " << expected;
          }
        }
      }
      return true;
    });
    EXPECT_TRUE(decoded) << info.name << " has no decoder";
  }
}

TEST(BlockDecodeTest, AValueOutsideTheEnumHasNoDecoder) {
  EXPECT_FALSE(block_decode::WithDecoder(static_cast<GgmlType>(4), false, [](auto) { return true; }));
}


}  // namespace
}  // namespace octo
