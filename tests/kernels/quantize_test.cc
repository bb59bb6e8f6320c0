// Activation encoders: hand-made blocks whose bytes follow from llama.cpp's
// x86 rules (quantize_activation.h), and the AVX2 encoders writing exactly the
// portable encoders' bytes.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quantize_activation.h"
#include "kernels/cpu/simd.h"
#include "kernels/half.h"

namespace octo::cpu {
namespace {

std::vector<uint8_t> Encode(ActType type, const std::vector<float>& x, Simd simd) {
  std::vector<uint8_t> out(static_cast<size_t>(ActRowBytes(type, static_cast<int64_t>(x.size()))), 0xAB);
  QuantizeActivationRow(type, x.data(), static_cast<int64_t>(x.size()), out.data(), simd);
  return out;
}

template <typename Block>
Block AsBlock(const std::vector<uint8_t>& bytes, size_t index = 0) {
  Block b;
  std::memcpy(&b, bytes.data() + index * sizeof(Block), sizeof(Block));
  return b;
}

// amax = 127 makes the multiplier 127 / amax exactly 1, so q = round(x):
// ties go to even (2.5 -> 2, 3.5 -> 4, -2.5 -> -2, 0.5 -> 0), where roundf
// (ggml's reference quantizer, not the x86 one) would give 3, 4, -3, 1.
TEST(QuantizeQ8_0Test, RoundsHalfToEvenWithMultiplier127OverAmax) {
  std::vector<float> x(32, 0.0f);
  x[0] = -127.0f;
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -2.5f;
  x[4] = 0.5f;
  x[5] = 1.25f;
  x[6] = 126.6f;
  const auto b = AsBlock<BlockQ8_0>(Encode(ActType::kQ8_0, x, Simd::kPortable));
  EXPECT_EQ(b.d, 0x3C00);  // 127 / 127 = 1.0
  const int8_t want[7] = {-127, 2, 4, -2, 0, 1, 127};
  for (int j = 0; j < 7; ++j) EXPECT_EQ(b.qs[j], want[j]) << "j " << j;
  for (int j = 7; j < 32; ++j) EXPECT_EQ(b.qs[j], 0) << "j " << j;
}

// amax = 1: d = 1/127 stored as fp16 (0x2008 = 1.0078125 * 2^-7, the
// nearest fp16 to 0.0078740157), and q = round(x * 127): the multiplier is
// 127 / amax = 127, not 1 / fp16(d) = 127.0078. x = 0.49998 gives 63.4975 ->
// 63, where 1 / fp16(d) would give 63.5014 -> 64; x = 0.5 gives 63.5 -> 64
// (the even neighbour).
TEST(QuantizeQ8_0Test, ScaleIsFp16OfAmaxOver127) {
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f;
  x[1] = 0.49998f;
  x[2] = -0.25f;  // -31.75 -> -32
  x[3] = 0.5f;
  const auto b = AsBlock<BlockQ8_0>(Encode(ActType::kQ8_0, x, Simd::kPortable));
  EXPECT_EQ(b.d, Fp32ToFp16(1.0f / 127.0f));
  EXPECT_EQ(b.d, 0x2008);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 63);
  EXPECT_EQ(b.qs[2], -32);
  EXPECT_EQ(b.qs[3], 64);
}

TEST(QuantizeQ8_0Test, ZeroBlockIsAllZero) {
  const std::vector<float> x(64, 0.0f);
  const auto b = AsBlock<BlockQ8_0>(Encode(ActType::kQ8_0, x, Simd::kPortable), 1);
  EXPECT_EQ(b.d, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b.qs[j], 0);
}

// Q8_1 adds s = fp16(d * sum(q)) with the fp32 d: here d = 1 and the quants
// -127 + 2 + 4 - 2 = -123, so s = fp16(-123) = 0xD7B0.
TEST(QuantizeQ8_1Test, StoresScaledSumOfQuants) {
  std::vector<float> x(32, 0.0f);
  x[0] = -127.0f;
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -2.5f;
  const auto b = AsBlock<BlockQ8_1>(Encode(ActType::kQ8_1, x, Simd::kPortable));
  EXPECT_EQ(b.d, 0x3C00);
  EXPECT_EQ(b.s, 0xD7B0);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[2], 4);
}

// Q8_K keeps the sign of the largest |x|: iscale = -127 / max. With max =
// -127 (first element), iscale = 1 and q = round-half-even(x); d = 1.
TEST(QuantizeQ8_KTest, NegativeMaxGivesPositiveScale) {
  std::vector<float> x(256, 0.0f);
  x[0] = -127.0f;
  x[1] = 2.5f;    // -> 2
  x[17] = 3.5f;   // -> 4, in bsums[1]
  x[255] = 0.5f;  // -> 0
  const auto b = AsBlock<BlockQ8_K>(Encode(ActType::kQ8_K, x, Simd::kPortable));
  EXPECT_EQ(b.d, 1.0f);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 2);
  EXPECT_EQ(b.qs[17], 4);
  EXPECT_EQ(b.qs[255], 0);
  EXPECT_EQ(b.bsums[0], -125);
  EXPECT_EQ(b.bsums[1], 4);
  for (int j = 2; j < 16; ++j) EXPECT_EQ(b.bsums[j], 0);
}

// With max = +127, iscale = -1: the quants come out negated and d = -1, so
// d * q still gives x back. The first of two equal |x| wins (here +127 before
// -127): -127 maps to +127, inside the min(127, .) clamp.
TEST(QuantizeQ8_KTest, PositiveMaxGivesNegativeScale) {
  std::vector<float> x(256, 0.0f);
  x[3] = 127.0f;
  x[4] = -127.0f;
  x[5] = 10.5f;  // -10.5 -> -10 (even)
  const auto b = AsBlock<BlockQ8_K>(Encode(ActType::kQ8_K, x, Simd::kPortable));
  EXPECT_EQ(b.d, -1.0f);
  EXPECT_EQ(b.qs[3], -127);
  EXPECT_EQ(b.qs[4], 127);
  EXPECT_EQ(b.qs[5], -10);
  EXPECT_EQ(b.bsums[0], -10);
}

// The product iscale * x is a float, rounded before the rounding to an
// integer: for max = 3, iscale = fl(-127 / 3) and x = 0.22440944612026215
// (a float), the exact product -9.49999989 would give -9, but it rounds to
// the float -9.5, a tie, which goes to the even -10. d = 1 / iscale.
TEST(QuantizeQ8_KTest, RoundsTheFloatProduct) {
  std::vector<float> x(256, 0.0f);
  x[0] = 3.0f;
  x[1] = 0.22440944612026215f;
  const auto b = AsBlock<BlockQ8_K>(Encode(ActType::kQ8_K, x, Simd::kPortable));
  const float iscale = -127.0f / 3.0f;
  EXPECT_EQ(b.d, 1.0f / iscale);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], -10);
}

TEST(QuantizeQ8_KTest, ZeroBlockIsAllZero) {
  const auto b = AsBlock<BlockQ8_K>(Encode(ActType::kQ8_K, std::vector<float>(256, 0.0f), Simd::kPortable));
  EXPECT_EQ(b.d, 0.0f);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(b.qs[j], 0);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.bsums[j], 0);
}

TEST(QuantizeFloatTest, F16AndBf16RoundToNearestEven) {
  // 1 + 2^-11 is halfway between fp16 1.0 and 1 + 2^-10: goes to 1.0 (even);
  // 1 + 3 * 2^-11 goes up to 1 + 2^-9. bf16 likewise at 2^-8.
  const std::vector<float> x = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f};
  const std::vector<uint8_t> f16 = Encode(ActType::kF16, x, Simd::kPortable);
  const std::vector<uint8_t> bf16 = Encode(ActType::kBF16, x, Simd::kPortable);
  uint16_t h[4], b[4];
  std::memcpy(h, f16.data(), 8);
  std::memcpy(b, bf16.data(), 8);
  EXPECT_EQ(h[0], 0x3C00);
  EXPECT_EQ(h[1], 0x3C02);
  EXPECT_EQ(b[2], 0x3F80);
  EXPECT_EQ(b[3], 0x3F82);
}

// Rows that exercise the rounding: random values, exact ties at every
// magnitude (k + 0.5 after the multiplier), zero blocks, tiny and huge
// values, subnormals, and rows whose largest |x| is negative or repeated.
std::vector<std::vector<float>> HardRows(int64_t cols) {
  std::vector<std::vector<float>> rows;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int r = 0; r < 20; ++r) {
    std::vector<float> x(cols);
    for (float& v : x) v = normal(rng) * std::exp2(static_cast<float>(static_cast<int>(rng() % 40) - 20));
    rows.push_back(x);
  }
  std::vector<float> ties(cols);
  for (int64_t i = 0; i < cols; ++i) {
    // Blocks of 32 with amax 127 (first element): x * 1 lands on k + 0.5.
    ties[i] = i % 32 == 0 ? 127.0f : static_cast<float>(static_cast<int>(i % 253) - 126) + 0.5f;
  }
  rows.push_back(ties);
  rows.push_back(std::vector<float>(cols, 0.0f));
  std::vector<float> mixed(cols);
  for (int64_t i = 0; i < cols; ++i) {
    mixed[i] = (i / 32) % 3 == 0 ? 0.0f : (i % 7 == 0 ? -1e-40f : (i % 5 == 0 ? 6e4f : -3.0f));
  }
  rows.push_back(mixed);
  return rows;
}

TEST(QuantizeActivationTest, Avx2WritesThePortableBytes) {
  if (DetectSimd() != Simd::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  for (ActType type : {ActType::kQ8_0, ActType::kQ8_1, ActType::kQ8_K, ActType::kF16, ActType::kBF16}) {
    for (const std::vector<float>& x : HardRows(1024)) {
      EXPECT_EQ(Encode(type, x, Simd::kPortable), Encode(type, x, Simd::kAvx2)) << ActTypeName(type);
    }
  }
}

// The F16 encoder's 8-wide body and scalar tail agree on a width that is not
// a multiple of 8.
TEST(QuantizeActivationTest, F16TailMatches) {
  if (DetectSimd() != Simd::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<float> x(37);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f + static_cast<float>(i) * 0x1p-11f;
  EXPECT_EQ(Encode(ActType::kF16, x, Simd::kPortable), Encode(ActType::kF16, x, Simd::kAvx2));
}

// Dequantizing an encoded row gives back x within half a quantization step.
TEST(QuantizeActivationTest, RoundTripWithinHalfAStep) {
  for (ActType type : {ActType::kQ8_0, ActType::kQ8_1, ActType::kQ8_K}) {
    for (const std::vector<float>& x : HardRows(512)) {
      const std::vector<uint8_t> enc = Encode(type, x, Simd::kPortable);
      std::vector<float> back(x.size());
      DequantizeActivationRow(type, enc.data(), static_cast<int64_t>(x.size()), back.data());
      const int block = ActBlockSize(type);
      for (size_t b = 0; b < x.size() / block; ++b) {
        float amax = 0.0f;
        for (int j = 0; j < block; ++j) amax = std::max(amax, std::fabs(x[b * block + j]));
        // Half a step of amax / 127, plus the fp16 rounding of the scale
        // (2^-11 relative, times up to 127 steps).
        const float tol = amax / 127.0f * (0.5f + 127.0f * 0x1p-11f) + 1e-30f;
        for (int j = 0; j < block; ++j) {
          EXPECT_LE(std::fabs(back[b * block + j] - x[b * block + j]), tol) << ActTypeName(type);
        }
      }
    }
  }
}

}  // namespace
}  // namespace octo::cpu
