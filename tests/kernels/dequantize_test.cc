// DequantizeRows: hand-made blocks of every type against values worked out by
// hand from the GGUF block layouts (kernels/cpu/quant_blocks.h), and the
// argument checks. The derivation of each expected number is in the comment
// above it; fp16 0x3C00 = 1, 0x3800 = 0.5, 0x4000 = 2, 0xBC00 = -1,
// 0xC000 = -2.
#include <cstdint>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/ops.h"

namespace octo {
namespace {

using namespace octo::cpu;  // block structs

template <typename Block>
std::vector<float> DequantizeBlock(GgmlType type, const Block& block, int64_t cols) {
  std::vector<uint8_t> bytes(sizeof(Block));
  std::memcpy(bytes.data(), &block, sizeof(Block));
  std::vector<float> out(static_cast<size_t>(cols), -999.0f);
  const absl::Status status = DequantizeRows(WeightMatrix{type, bytes.data(), 1, cols}, 0, 1, out.data());
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// d = 0.5. Byte j holds element j in its low nibble (0..15 across the bytes)
// and element j + 16 in its high nibble (8..15, then 0..7): x = (q - 8) * 0.5.
TEST(DequantizeTest, Q4_0ByHand) {
  BlockQ4_0 b{};
  b.d = 0x3800;
  const uint8_t qs[16] = {0x80, 0x91, 0xA2, 0xB3, 0xC4, 0xD5, 0xE6, 0xF7,
                          0x08, 0x19, 0x2A, 0x3B, 0x4C, 0x5D, 0x6E, 0x7F};
  std::memcpy(b.qs, qs, 16);
  const std::vector<float> want = {
      -4.0f, -3.5f, -3.0f, -2.5f, -2.0f, -1.5f, -1.0f, -0.5f,  // low nibbles 0..7
      0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  2.5f,  3.0f,  3.5f,   // low nibbles 8..15
      0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  2.5f,  3.0f,  3.5f,   // high nibbles 8..15
      -4.0f, -3.5f, -3.0f, -2.5f, -2.0f, -1.5f, -1.0f, -0.5f,  // high nibbles 0..7
  };
  EXPECT_EQ(DequantizeBlock(GgmlType::kQ4_0, b, 32), want);
}

// d = -1: x = -q, including q = -128 -> 128.
TEST(DequantizeTest, Q8_0ByHand) {
  BlockQ8_0 b{};
  b.d = 0xBC00;
  b.qs[0] = -128;
  b.qs[1] = 127;
  b.qs[2] = 1;
  b.qs[31] = -7;
  std::vector<float> want(32, -0.0f);
  want[0] = 128.0f;
  want[1] = -127.0f;
  want[2] = -1.0f;
  want[31] = 7.0f;
  EXPECT_EQ(DequantizeBlock(GgmlType::kQ8_0, b, 32), want);
}

// d = 1, m = -2: x = q - 2. qs[0] = 0xF0: element 0 -> 0 - 2, element 16 ->
// 15 - 2; qs[1] = 0x01: element 1 -> 1 - 2, element 17 -> 0 - 2.
TEST(DequantizeTest, Q4_1ByHand) {
  BlockQ4_1 b{};
  b.d = 0x3C00;
  b.m = 0xC000;
  b.qs[0] = 0xF0;
  b.qs[1] = 0x01;
  const std::vector<float> got = DequantizeBlock(GgmlType::kQ4_1, b, 32);
  EXPECT_EQ(got[0], -2.0f);
  EXPECT_EQ(got[16], 13.0f);
  EXPECT_EQ(got[1], -1.0f);
  EXPECT_EQ(got[17], -2.0f);
  EXPECT_EQ(got[5], -2.0f);
}

// d = 2; qh = 0x80010001 sets the 5th bit of elements 0, 16 and 31.
// qs[0] = 0x3F: element 0 = (15 | 16) - 16 = 15 -> 30, element 16 =
// (3 | 16) - 16 = 3 -> 6. qs[15] = 0: element 15 = 0 - 16 -> -32, element
// 31 = 16 - 16 -> 0. Other bytes 0x88: (8 - 16) * 2 = -16.
TEST(DequantizeTest, Q5_0ByHand) {
  BlockQ5_0 b{};
  b.d = 0x4000;
  const uint8_t qh[4] = {0x01, 0x00, 0x01, 0x80};
  std::memcpy(b.qh, qh, 4);
  std::memset(b.qs, 0x88, 16);
  b.qs[0] = 0x3F;
  b.qs[15] = 0x00;
  const std::vector<float> got = DequantizeBlock(GgmlType::kQ5_0, b, 32);
  EXPECT_EQ(got[0], 30.0f);
  EXPECT_EQ(got[16], 6.0f);
  EXPECT_EQ(got[15], -32.0f);
  EXPECT_EQ(got[31], 0.0f);
  EXPECT_EQ(got[7], -16.0f);
  EXPECT_EQ(got[20], -16.0f);
}

// d = 0.5, m = 1; the 5th bit only for element 31 (qh bit 31). qs[15] = 0xF0:
// element 15 = 0 * 0.5 + 1 = 1, element 31 = 31 * 0.5 + 1 = 16.5; zeros
// elsewhere give 1.
TEST(DequantizeTest, Q5_1ByHand) {
  BlockQ5_1 b{};
  b.d = 0x3800;
  b.m = 0x3C00;
  b.qh[3] = 0x80;
  b.qs[15] = 0xF0;
  const std::vector<float> got = DequantizeBlock(GgmlType::kQ5_1, b, 32);
  EXPECT_EQ(got[15], 1.0f);
  EXPECT_EQ(got[31], 16.5f);
  EXPECT_EQ(got[0], 1.0f);
}

// IQ4_NL: d = 0.5 times the table value. qs[0] = 0xF0: element 0 = table[0]
// = -127 -> -63.5, element 16 = table[15] = 113 -> 56.5. qs[1] = 0x78:
// element 1 = table[8] = 1 -> 0.5, element 17 = table[7] = -10 -> -5.
TEST(DequantizeTest, Iq4NlByHand) {
  BlockIq4Nl b{};
  b.d = 0x3800;
  b.qs[0] = 0xF0;
  b.qs[1] = 0x78;
  const std::vector<float> got = DequantizeBlock(GgmlType::kIQ4_NL, b, 32);
  EXPECT_EQ(got[0], -63.5f);
  EXPECT_EQ(got[16], 56.5f);
  EXPECT_EQ(got[1], 0.5f);
  EXPECT_EQ(got[17], -5.0f);
}

// d = 1, dmin = 0.5; x = d * (sc & 15) * q - dmin * (sc >> 4). Every qs byte
// is 0xE4 = 0b11'10'01'00, so q = s for the 2-bit field s: element
// 128h + 32s + l has q = s. Sub-block j = element / 16.
//   scales[0] = 0x21 (sc 1, m 2):  element 0 (s 0)   = 0 - 1 = -1
//   scales[1] = 0x03 (sc 3, m 0):  element 16 (s 0)  = 0 - 0 = 0
//   scales[2] = 0x11 (sc 1, m 1):  element 32 (s 1)  = 1 - 0.5 = 0.5
//   scales[6] = 0x11:              element 100 (s 3) = 3 - 0.5 = 2.5
//   scales[15] = 0xF7 (sc 7, m 15): element 255 (s 3) = 21 - 7.5 = 13.5
TEST(DequantizeTest, Q2_KByHand) {
  BlockQ2_K b{};
  b.d = 0x3C00;
  b.dmin = 0x3800;
  std::memset(b.scales, 0x11, 16);
  b.scales[0] = 0x21;
  b.scales[1] = 0x03;
  b.scales[15] = 0xF7;
  std::memset(b.qs, 0xE4, 64);
  const std::vector<float> got = DequantizeBlock(GgmlType::kQ2_K, b, 256);
  EXPECT_EQ(got[0], -1.0f);
  EXPECT_EQ(got[16], 0.0f);
  EXPECT_EQ(got[32], 0.5f);
  EXPECT_EQ(got[100], 2.5f);
  EXPECT_EQ(got[255], 13.5f);
}

// d = 1. Six-bit scales s_j (x = (s_j - 32) * q): s_0 = 33 (+1), s_1 = 31
// (-1), s_15 = 40 (+8), all others 32 (0). Low nibbles of s_0..s_7 in bytes
// 0..7, of s_8..s_15 in their high nibbles; the top two bits of s_j in byte
// 8 + j % 4 at bit 2 * (j / 4):
//   bytes 0..7  = 0x01 0x0F 0 0 0 0 0 0x80   (s_0 low 1, s_1 low 15, s_15 low 8)
//   byte 8  = s_0, s_4, s_8, s_12 tops 2,2,2,2 = 0xAA
//   byte 9  = s_1 top 1, s_5, s_9, s_13 top 2   = 0xA9
//   bytes 10, 11 = 0xAA
// qs = 0xE4 (q low 2 bits = s, the field index), except qs[17] = 0xE7 (field
// 0 = 3). hmask all set (no -4) except byte 0 bit 0 (element 0) and byte 31
// bit 7 (element 7 * 32 + 31 = 255):
//   element 0:   low 0, high clear -> q = -4, scale +1 -> -4
//   element 1:   low 0, high set   -> 0
//   element 17:  low 3, high set, sub-block 1 (scale -1) -> -3
//   element 255: low 3, high clear -> q = -1, sub-block 15 (+8) -> -8
//   sub-blocks 2..14 have scale 0 -> 0
TEST(DequantizeTest, Q3_KByHand) {
  BlockQ3_K b{};
  b.d = 0x3C00;
  const uint8_t scales[12] = {0x01, 0x0F, 0, 0, 0, 0, 0, 0x80, 0xAA, 0xA9, 0xAA, 0xAA};
  std::memcpy(b.scales, scales, 12);
  std::memset(b.qs, 0xE4, 64);
  b.qs[17] = 0xE7;
  std::memset(b.hmask, 0xFF, 32);
  b.hmask[0] = 0xFE;
  b.hmask[31] = 0x7F;
  const std::vector<float> got = DequantizeBlock(GgmlType::kQ3_K, b, 256);
  EXPECT_EQ(got[0], -4.0f);
  EXPECT_EQ(got[1], 0.0f);
  EXPECT_EQ(got[17], -3.0f);
  EXPECT_EQ(got[255], -8.0f);
  for (int i = 32; i < 240; ++i) EXPECT_EQ(got[i], 0.0f) << i;
}

// Q4_K/Q5_K scales: sc_j / m_j six bits each. Chosen: sc = 1, 2, 3, 4, 5, 6,
// 7, 63 and m = 0, 10, 20, 30, 1, 2, 3, 63. Bytes 0..3 hold sc_0..3 and bytes
// 4..7 m_0..3 in their low 6 bits; bytes 8..11 hold sc_4..7 (low nibble) and
// m_4..7 (high nibble), whose top two bits sit in bits 6-7 of bytes 0..3
// (sc) and 4..7 (m). Only sc_7 = m_7 = 63 has top bits (3):
//   byte 3 = 4 | 0xC0 = 0xC4, byte 7 = 30 | 0xC0 = 0xDE, byte 11 = 0xFF.
constexpr uint8_t kQ45KScales[12] = {0x01, 0x02, 0x03, 0xC4, 0x00, 0x0A, 0x14, 0xDE, 0x15, 0x26, 0x37, 0xFF};

// d = 1, dmin = 0.5, x = sc * q - 0.5 * m. Quarter k of qs (32 bytes): low
// nibbles are sub-block 2k, high nibbles 2k + 1. All qs = 0x5A (low 10,
// high 5) except qs[0] = 0x0F:
//   element 0   (sub 0: sc 1, m 0, q 15)   = 15
//   element 32  (sub 1: sc 2, m 10, q 0)   = -5
//   element 33  (sub 1, q 5)               = 10 - 5 = 5
//   element 100 (sub 3: sc 4, m 30, q 5)   = 20 - 15 = 5
//   element 128 (sub 4: sc 5, m 1, q 10)   = 50 - 0.5 = 49.5
//   element 255 (sub 7: sc 63, m 63, q 5)  = 315 - 31.5 = 283.5
TEST(DequantizeTest, Q4_KByHand) {
  BlockQ4_K b{};
  b.d = 0x3C00;
  b.dmin = 0x3800;
  std::memcpy(b.scales, kQ45KScales, 12);
  std::memset(b.qs, 0x5A, 128);
  b.qs[0] = 0x0F;
  const std::vector<float> got = DequantizeBlock(GgmlType::kQ4_K, b, 256);
  EXPECT_EQ(got[0], 15.0f);
  EXPECT_EQ(got[32], -5.0f);
  EXPECT_EQ(got[33], 5.0f);
  EXPECT_EQ(got[100], 5.0f);
  EXPECT_EQ(got[128], 49.5f);
  EXPECT_EQ(got[255], 283.5f);
}

// As Q4_K (same scales, qs = 0x5A) plus the 5th bit: qh[l] bit j belongs to
// element 32j + l. qh[0] = 0x01 (element 0), qh[31] = 0x80 (element 255):
//   element 0   = (10 + 16) * 1 - 0   = 26
//   element 1   = 10 * 1              = 10
//   element 223 (sub 6: sc 7, m 3, low nibble, no bit) = 70 - 1.5 = 68.5
//   element 255 = (5 + 16) * 63 - 31.5 = 1291.5
TEST(DequantizeTest, Q5_KByHand) {
  BlockQ5_K b{};
  b.d = 0x3C00;
  b.dmin = 0x3800;
  std::memcpy(b.scales, kQ45KScales, 12);
  std::memset(b.qs, 0x5A, 128);
  b.qh[0] = 0x01;
  b.qh[31] = 0x80;
  const std::vector<float> got = DequantizeBlock(GgmlType::kQ5_K, b, 256);
  EXPECT_EQ(got[0], 26.0f);
  EXPECT_EQ(got[1], 10.0f);
  EXPECT_EQ(got[223], 68.5f);
  EXPECT_EQ(got[255], 1291.5f);
}

// d = 0.5, x = d * scale_j * (q - 32), scale_j = j - 8 except scale_0 =
// -128 and scale_15 = 127. Element l of a half (l < 32) takes ql[l] low
// nibble and qh[l] bits 0-1; l + 32: ql[l + 32] low, bits 2-3; l + 64: ql[l]
// high, bits 4-5; l + 96: ql[l + 32] high, bits 6-7. With ql[0] = 0x3F,
// qh[0] = 0xE7 (fields 3, 1, 2, 3) and zeros elsewhere in the first half:
//   element 0:  15 | 3 << 4 = 63 -> 31,  sub 0 (-128): 0.5 * -128 * 31 = -1984
//   element 32: 0 | 1 << 4 = 16 -> -16,  sub 2 (-6):   48
//   element 64: 3 | 2 << 4 = 35 -> 3,    sub 4 (-4):   -6
//   element 96: 0 | 3 << 4 = 48 -> 16,   sub 6 (-2):   -16
//   element 1:  0 -> -32,                sub 0:        2048
// Second half, element 255 = 128 + 96 + 31: ql[64 + 32 + 31] = 0xA0 (high
// 10), qh[32 + 31] = 0x40 (bits 6-7 = 1): 10 | 16 = 26 -> -6, sub 15 (127):
// 0.5 * 127 * -6 = -381.
TEST(DequantizeTest, Q6_KByHand) {
  BlockQ6_K b{};
  b.d = 0x3800;
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(j - 8);
  b.scales[0] = -128;
  b.scales[15] = 127;
  b.ql[0] = 0x3F;
  b.qh[0] = 0xE7;
  b.ql[127] = 0xA0;
  b.qh[63] = 0x40;
  const std::vector<float> got = DequantizeBlock(GgmlType::kQ6_K, b, 256);
  EXPECT_EQ(got[0], -1984.0f);
  EXPECT_EQ(got[32], 48.0f);
  EXPECT_EQ(got[64], -6.0f);
  EXPECT_EQ(got[96], -16.0f);
  EXPECT_EQ(got[1], 2048.0f);
  EXPECT_EQ(got[255], -381.0f);
}

// d = 1, x = (ls_j - 32) * table[q]. ls_0 = 33 (+1), ls_1 = 30 (-2), ls_7 =
// 63 (+31), others 32 (0). Low nibbles in scales_l[j / 2] (nibble j % 2):
// scales_l = {1 | 14 << 4, 0, 0, 15 << 4} = {0xE1, 0, 0, 0xF0}. Top two bits
// at scales_h bit 2j: 2, 1, 2, 2, 2, 2, 2, 3 -> 0xEAA6. Sub-block j's 16
// bytes qs[16j..]: low nibbles are its elements 0..15, high 16..31. qs all
// 0x88 (table[8] = 1) except qs[0] = 0xF0:
//   element 0   = table[0] = -127 * 1   = -127
//   element 16  = table[15] = 113 * 1   = 113
//   element 32  (sub 1: -2) = 1 * -2    = -2
//   element 100 (sub 3: 0)              = 0
//   element 255 (sub 7: 31) = 1 * 31    = 31
TEST(DequantizeTest, Iq4XsByHand) {
  BlockIq4Xs b{};
  b.d = 0x3C00;
  b.scales_h = 0xEAA6;
  const uint8_t scales_l[4] = {0xE1, 0x00, 0x00, 0xF0};
  std::memcpy(b.scales_l, scales_l, 4);
  std::memset(b.qs, 0x88, 128);
  b.qs[0] = 0xF0;
  const std::vector<float> got = DequantizeBlock(GgmlType::kIQ4_XS, b, 256);
  EXPECT_EQ(got[0], -127.0f);
  EXPECT_EQ(got[16], 113.0f);
  EXPECT_EQ(got[32], -2.0f);
  EXPECT_EQ(got[100], 0.0f);
  EXPECT_EQ(got[255], 31.0f);
}

// TQ1_0 by hand: trits written as the format packs them (five base-3
// digits per qs byte, four per qh byte, the first digit most significant,
// the byte the number scaled up to 0..255 and rounded up), then read back
// in element order: element j from digit j / 32 of qs[j % 32], 160 + j from
// digit j / 16 of qs[32 + j % 16], 240 + j from digit j / 4 of qh[j % 4].
uint8_t PackTrits(const int* digits, int n) {
  int value = 0;
  for (int k = 0; k < n; ++k) value = 3 * value + digits[k];
  for (int k = n; k < 5; ++k) value *= 3;  // qh bytes: four digits, the fifth 0
  return static_cast<uint8_t>((value * 256 + 242) / 243);
}

TEST(DequantizeTest, TernaryByHand) {
  std::vector<int> trit(256);
  for (int j = 0; j < 256; ++j) trit[j] = (j * 7 + j / 5) % 3 - 1;  // an irregular pattern of -1, 0, 1
  BlockTq1_0 b1{};
  b1.d = 0x4000;  // 2
  for (int m = 0; m < 32; ++m) {
    int digits[5];
    for (int n = 0; n < 5; ++n) digits[n] = trit[32 * n + m] + 1;
    b1.qs[m] = PackTrits(digits, 5);
  }
  for (int m = 0; m < 16; ++m) {
    int digits[5];
    for (int n = 0; n < 5; ++n) digits[n] = trit[160 + 16 * n + m] + 1;
    b1.qs[32 + m] = PackTrits(digits, 5);
  }
  for (int m = 0; m < 4; ++m) {
    int digits[4];
    for (int n = 0; n < 4; ++n) digits[n] = trit[240 + 4 * n + m] + 1;
    b1.qh[m] = PackTrits(digits, 4);
  }
  // TQ2_0: element 32l + m of half h in bits 2l of qs[32h + m], as t + 1.
  BlockTq2_0 b2{};
  b2.d = 0x4000;
  for (int j = 0; j < 256; ++j) {
    b2.qs[32 * (j / 128) + j % 32] |= static_cast<uint8_t>((trit[j] + 1) << (2 * ((j % 128) / 32)));
  }
  const std::vector<float> got1 = DequantizeBlock(GgmlType::kTQ1_0, b1, 256);
  const std::vector<float> got2 = DequantizeBlock(GgmlType::kTQ2_0, b2, 256);
  for (int j = 0; j < 256; ++j) {
    EXPECT_EQ(got1[j], 2.0f * trit[j]) << "TQ1_0 element " << j;
    EXPECT_EQ(got2[j], 2.0f * trit[j]) << "TQ2_0 element " << j;
  }
}

// MXFP4 by its definition (OCP Microscaling v1.0): an E2M1 element is sign,
// 2 exponent bits and 1 mantissa bit: E = 0 gives M / 2, else 2^(E - 1) *
// (1 + M / 2); an E8M0 scale e is 2^(e - 127). Element j of the block holds
// code j % 16 (Q4_0's nibble order), for scales from the smallest to 2^127.
TEST(DequantizeTest, Mxfp4ByTheFormatsDefinition) {
  for (const int e : {0, 1, 119, 127, 130, 254}) {
    BlockMxfp4 b{};
    b.e = static_cast<uint8_t>(e);
    for (int j = 0; j < 16; ++j) {
      const int low = j % 16, high = (j + 16) % 16;
      b.qs[j] = static_cast<uint8_t>(low | (high << 4));
    }
    const std::vector<float> got = DequantizeBlock(GgmlType::kMXFP4, b, 32);
    for (int j = 0; j < 32; ++j) {
      const int q = j % 16, exponent = (q >> 1) & 3, mantissa = q & 1;
      const double magnitude = exponent == 0 ? 0.5 * mantissa : std::ldexp(1.0 + 0.5 * mantissa, exponent - 1);
      const double want = ((q & 8) ? -magnitude : magnitude) * std::ldexp(1.0, e - 127);
      EXPECT_EQ(got[j], static_cast<float>(want)) << "e " << e << " code " << q;
    }
  }
}

TEST(DequantizeTest, FloatTypesByHand) {
  // fp16: 1, -2, the smallest subnormal 2^-24, the largest finite 65504.
  const uint16_t f16[4] = {0x3C00, 0xC000, 0x0001, 0x7BFF};
  std::vector<float> out(4);
  ASSERT_TRUE(DequantizeRows(WeightMatrix{GgmlType::kF16, f16, 1, 4}, 0, 1, out.data()).ok());
  EXPECT_EQ(out, (std::vector<float>{1.0f, -2.0f, 0x1p-24f, 65504.0f}));
  // bf16: the top half of the fp32 bits.
  const uint16_t bf16[4] = {0x3F80, 0xC000, 0x0001, 0x4049};
  ASSERT_TRUE(DequantizeRows(WeightMatrix{GgmlType::kBF16, bf16, 1, 4}, 0, 1, out.data()).ok());
  EXPECT_EQ(out, (std::vector<float>{1.0f, -2.0f, 0x1p-133f, 3.140625f}));
  const float f32[4] = {1.5f, -0.0f, 3e38f, 1e-45f};
  ASSERT_TRUE(DequantizeRows(WeightMatrix{GgmlType::kF32, f32, 1, 4}, 0, 1, out.data()).ok());
  EXPECT_EQ(0, std::memcmp(out.data(), f32, sizeof(f32)));
}

// Three Q8_0 rows of two blocks, row r filled with the value r + 1 (d = 1,
// q = r + 1).
std::vector<BlockQ8_0> ThreeQ8Rows() {
  std::vector<BlockQ8_0> blocks(6);
  for (int r = 0; r < 3; ++r) {
    for (int b = 0; b < 2; ++b) {
      blocks[2 * r + b].d = 0x3C00;
      std::memset(blocks[2 * r + b].qs, r + 1, 32);
    }
  }
  return blocks;
}

// Rows are found at first_row * row_bytes.
TEST(DequantizeTest, ReadsTheRequestedRows) {
  const std::vector<BlockQ8_0> blocks = ThreeQ8Rows();
  std::vector<float> out(128, -1.0f);
  ASSERT_TRUE(DequantizeRows(WeightMatrix{GgmlType::kQ8_0, blocks.data(), 3, 64}, 1, 2, out.data()).ok());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i], 2.0f) << i;
  for (int i = 64; i < 128; ++i) EXPECT_EQ(out[i], 3.0f) << i;
}

// GetRows gathers the rows the ids name, in their order (repeats allowed),
// each as DequantizeRows gives it; an id outside the rows is refused.
TEST(DequantizeTest, GetRowsGathersTheNamedRows) {
  const std::vector<BlockQ8_0> blocks = ThreeQ8Rows();
  const WeightMatrix w{GgmlType::kQ8_0, blocks.data(), 3, 64};
  const int32_t ids[] = {2, 0, 2, 1};
  std::vector<float> out(4 * 64, -1.0f);
  ASSERT_TRUE(GetRows(w, ids, 4, out.data()).ok());
  for (int i = 0; i < 4; ++i) {
    for (int c = 0; c < 64; ++c) ASSERT_EQ(out[i * 64 + c], static_cast<float>(ids[i] + 1)) << i << " " << c;
  }
  const int32_t bad[] = {1, 3};
  const absl::Status refused = GetRows(w, bad, 2, out.data());
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("id 3"), std::string::npos) << refused;
  EXPECT_EQ(GetRows(w, ids, 0, out.data()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GetRows(w, nullptr, 1, out.data()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(DequantizeTest, RejectsBadArguments) {
  std::vector<BlockQ8_0> blocks(6);
  const WeightMatrix w{GgmlType::kQ8_0, blocks.data(), 3, 64};
  std::vector<float> out(64, 7.0f);
  const std::vector<float> before = out;
  struct Case {
    WeightMatrix w;
    int64_t first_row;
    int64_t n_rows;
    float* out;
    const char* needle;
  };
  const Case cases[] = {
      {w, -1, 1, out.data(), "first_row -1"},
      {w, 2, 2, out.data(), "n_rows 2"},
      {w, 0, 0, out.data(), "n_rows 0"},
      {w, 3, 1, out.data(), "first_row 3"},
      {w, 0, 1, nullptr, "out is null"},
      {WeightMatrix{GgmlType::kQ8_0, nullptr, 3, 64}, 0, 1, out.data(), "w.data"},
      {WeightMatrix{GgmlType::kQ8_0, blocks.data(), 3, 48}, 0, 1, out.data(), "w.cols (48)"},
      {WeightMatrix{GgmlType::kQ8_0, blocks.data(), -1, 64}, 0, 1, out.data(), "w.rows (-1)"},
  };
  for (const Case& c : cases) {
    const absl::Status status = DequantizeRows(c.w, c.first_row, c.n_rows, c.out);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.needle;
    EXPECT_NE(std::string(status.message()).find(c.needle), std::string::npos) << status;
    EXPECT_EQ(out, before) << c.needle;
  }
}

}  // namespace
}  // namespace octo
