// The GGUF/ggml block encodings, byte for byte, as C++ structs.
//
// A quantized row of n values is n / block_size blocks laid end to end, with no
// padding (ggml-common.h is the authority; the static_asserts pin the sizes
// storage/ggml_type.cc lists). Multi-byte fields are little-endian, as ggml
// writes them on every platform it runs on; this code assumes a little-endian
// host. fp16 fields are kept as raw uint16_t bits (kernels/half.h converts).
//
// Element order inside a block, which every dequantizer and dot product follows:
//  - 32-wide blocks with nibbles (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL): byte j holds
//    element j in its low nibble and element j + 16 in its high nibble. Q5's
//    5th bits: bit j of qh (a little-endian u32) is element j's.
//  - Q2_K/Q3_K: each 128-element half takes 32 bytes of qs; bits 2s..2s+1 of
//    byte l are element 32s + l of that half. Q3_K's hmask bit k of byte l is
//    the high bit of element 32k + l (k = 0..7 over the whole block); it is SET
//    for the upper half of the range: q = low2 + (bit ? 0 : -4).
//  - Q4_K/Q5_K: each 64-element quarter takes 32 bytes of qs: low nibbles are
//    elements 0..31 of it, high nibbles 32..63. Q5_K's qh bit 2k / 2k+1 of
//    byte l is the 5th bit of element 64k + l / 64k + 32 + l.
//  - Q6_K: each 128-element half takes 64 bytes of ql and 32 of qh: element
//    l (l < 32) low nibble ql[l], l + 32 -> ql[l + 32], l + 64 -> ql[l] >> 4,
//    l + 96 -> ql[l + 32] >> 4; their top 2 bits are qh[l] bits 0-1, 2-3,
//    4-5, 6-7.
//  - IQ4_XS: 32-element sub-blocks laid out as IQ4_NL blocks without the d.
//  - TQ1_0: five trits per byte of qs and four per byte of qh, each a base-3
//    digit of the byte read as a fraction of 256 (Tq1Digit). Elements 0..159
//    are digit j / 32 of qs[j % 32]; 160..239 digit (j - 160) / 16 of
//    qs[32 + (j - 160) % 16]; 240..255 digit (j - 240) / 4 of qh[(j - 240) % 4].
//  - TQ2_0: each 128-element half takes 32 bytes of qs; bits 2l..2l+1 of byte
//    m are element 32l + m of that half (as Q2_K, without scales).
#pragma once

#include <bit>
#include <cstdint>

#include "kernels/host_device.h"

namespace octo::cpu {

inline constexpr int kQK = 32;          // elements per Q4_0..Q8_1 / IQ4_NL block
inline constexpr int kQKK = 256;        // elements per K-quant super-block (and Q8_K, IQ4_XS)
inline constexpr int kKScaleBytes = 12; // Q3_K..Q5_K packed 6-bit scales

// --- 32-wide blocks: x = d * q (+ m) -----------------------------------------

struct BlockQ4_0 {  // x = d * (q - 8), q in 0..15
  uint16_t d;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

struct BlockQ4_1 {  // x = d * q + m, q in 0..15
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

struct BlockQ5_0 {  // x = d * (q - 16), q in 0..31
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

struct BlockQ5_1 {  // x = d * q + m, q in 0..31
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

struct BlockQ8_0 {  // x = d * q (weights and activations)
  uint16_t d;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ8_1 {  // activations only: Q8_0 plus s = d * sum(qs) (fp16)
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_1) == 36);

struct BlockIq4Nl {  // x = d * kIq4NlValues[q], q in 0..15
  uint16_t d;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockIq4Nl) == 18);

// The 16 non-linear levels of IQ4_NL and IQ4_XS.
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                             1,    13,   25,  38,  53,  69,  89,  113};

// --- 256-wide super-blocks -----------------------------------------------------

// 16 sub-blocks of 16: x = d * (scales[j] & 15) * q - dmin * (scales[j] >> 4).
struct BlockQ2_K {
  uint8_t scales[kQKK / 16];
  uint8_t qs[kQKK / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// 16 sub-blocks of 16: x = d * (s_j - 32) * q, q in -4..3, s_j 6 bits:
// low 4 bits in scales[j] (j < 8) or scales[j - 8] >> 4, top 2 bits in
// scales[8 + j % 4] bits 2 * (j / 4).
struct BlockQ3_K {
  uint8_t hmask[kQKK / 8];
  uint8_t qs[kQKK / 4];
  uint8_t scales[kKScaleBytes];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// 8 sub-blocks of 32: x = d * sc_j * q - dmin * m_j, q in 0..15; sc_j, m_j
// 6 bits each, packed in 12 bytes (UnpackQ4KScaleMin).
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQKK / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// As Q4_K with a 5th bit per element, q in 0..31.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// 16 sub-blocks of 16: x = d * scales[j] * (q - 32), q in 0..63.
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// 8 sub-blocks of 32: x = d * (ls_j - 32) * kIq4NlValues[q]; ls_j 6 bits: low
// 4 in scales_l[j / 2] (nibble j % 2), top 2 in scales_h bits 2j..2j+1.
struct BlockIq4Xs {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQKK / 64];
  uint8_t qs[kQKK / 2];
};
static_assert(sizeof(BlockIq4Xs) == 136);

// --- Ternary blocks (BitNet b1.58): x = d * t, t in {-1, 0, 1} --------------

struct BlockTq1_0 {  // 1.6875 bits per weight
  uint8_t qs[(kQKK - 4 * kQKK / 64) / 5];  // 48 bytes, five trits each
  uint8_t qh[kQKK / 64];                   // 4 bytes, four trits each
  uint16_t d;
};
static_assert(sizeof(BlockTq1_0) == 54);

struct BlockTq2_0 {  // 2.0625 bits per weight: t + 1 in two bits
  uint8_t qs[kQKK / 4];
  uint16_t d;
};
static_assert(sizeof(BlockTq2_0) == 66);

// Digit n (0..4) of a TQ1_0 byte: the byte is a base-3 number scaled to
// 0..255, so multiplying by 3^n (mod 256) brings digit n to the top, and
// (q * 3) >> 8 reads it (0, 1 or 2).
OCTO_HD inline int Tq1Digit(uint8_t byte, int n) {
  uint8_t q = byte;
  for (int k = 0; k < n; ++k) q = static_cast<uint8_t>(q * 3);
  return (static_cast<uint16_t>(q) * 3) >> 8;
}

// Element j's trit (-1, 0 or 1) of a TQ1_0 / TQ2_0 block.
OCTO_HD inline int Tq1Trit(const BlockTq1_0& b, int j) {
  if (j < 160) return Tq1Digit(b.qs[j % 32], j / 32) - 1;
  if (j < 240) return Tq1Digit(b.qs[32 + (j - 160) % 16], (j - 160) / 16) - 1;
  return Tq1Digit(b.qh[(j - 240) % 4], (j - 240) / 4) - 1;
}
OCTO_HD inline int Tq2Trit(const BlockTq2_0& b, int j) {
  const int half = j / 128, l = (j % 128) / 32, m = j % 32;
  return ((b.qs[32 * half + m] >> (2 * l)) & 3) - 1;
}

// --- MXFP4 (OCP microscaling FP4): 32 E2M1 values and an E8M0 scale --------

struct BlockMxfp4 {  // x = 2^(e - 127) * E2M1(q): q's sign, 2 exponent bits, 1 mantissa bit
  uint8_t e;
  uint8_t qs[kQK / 2];  // nibbles as Q4_0's (byte j: element j low, j + 16 high)
};
static_assert(sizeof(BlockMxfp4) == 17);

// The E2M1 values doubled (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives,
// times 2), so they are integers; the scale is halved to match (ggml's way).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// The fp32 bits of 2^(e - 128), half the E8M0 scale (2^-128 and 2^-127 are
// subnormal; e = 255, NaN by the format, reads as 2^127, as ggml's does).
OCTO_HD inline uint32_t E8M0HalfBits(uint8_t e) {
  return e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
}
// The same as a float (host code; block_decode.h's FloatBits on the device).
inline float E8M0Half(uint8_t e) { return std::bit_cast<float>(E8M0HalfBits(e)); }

// A Q8_0 activation row as MatMul keeps it: the ggml blocks, then (from byte
// Q8_0SideOffset(cols)) one Q8_0Side per block, derived from the block: its
// d as fp32 and the sums of its quants in groups of 4 (elements 4k..4k+3).
// The AVX2 dot products read it to skip the fp16 conversion of d and, for
// weights with unsigned quants (Q4_0: q = n - 8), to take sum(n * q_x) -
// 8 * sum(q_x) exactly per group of 4 rather than sign-flipping every byte.
struct Q8_0Side {
  float d;
  int32_t sums4[kQK / 4];
};
static_assert(sizeof(Q8_0Side) == 36);

inline int64_t Q8_0SideOffset(int64_t cols) {
  return (cols / kQK * static_cast<int64_t>(sizeof(BlockQ8_0)) + 31) / 32 * 32;
}

// Activations for the K-quants: x = d * q (d fp32), bsums[j] = sum of q over
// elements 16j..16j+15.
struct BlockQ8_K {
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);

// Sub-block j's (scale, min) of a Q4_K/Q5_K block: for j < 4 the low 6 bits
// of bytes j and j + 4; for j >= 4 the nibbles of byte j + 4 with the top two
// bits taken from bytes j - 4 (scale) and j (min).
OCTO_HD inline void UnpackQ4KScaleMin(const uint8_t* scales, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Sub-block j's signed scale (s_j - 32, in -32..31) of a Q3_K block.
OCTO_HD inline int UnpackQ3KScale(const uint8_t* scales, int j) {
  const int low = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
  const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// Sub-block j's 6-bit scale (0..63, before the -32) of an IQ4_XS block.
OCTO_HD inline int UnpackIq4XsScale(const BlockIq4Xs& b, int j) {
  return ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((b.scales_h >> (2 * j)) & 3) << 4);
}

// Round to nearest, ties to even, for |v| <= 2^22: adding 1.5 * 2^23 makes
// the float unit the integer unit, so the IEEE addition does the rounding
// (ggml's nearest_int; the same as _mm256_round_ps(v, nearest) then convert).
// Reads the bits rather than converting, so no input is undefined behaviour.
inline int NearestInt(float v) {
  const float shifted = v + 12582912.0f;
  return static_cast<int>(std::bit_cast<uint32_t>(shifted) & 0x007fffffu) - 0x00400000;
}

}  // namespace octo::cpu
