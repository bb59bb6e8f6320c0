// AVX2 helpers the dot products share: loads, lane sums, and the unpacking
// of the block encodings (quant_blocks.h) into vectors of quants and scales.
// The single-token dots (vec_dot_*_avx2.cc) and the token-tile dots
// (vec_dot_tile_*_avx2.cc) unpack with the same functions, so both see the
// same integers.
//
// Include only from files compiled with -mavx2 -mfma -mf16c (*_avx2.cc).
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/half.h"

namespace octo::cpu::avx2 {

// fp16 -> fp32 with F16C (exact, as Fp16ToFp32).
inline float F16(uint16_t h) { return _cvtsh_ss(h); }

inline __m256i Load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i Load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

inline __m256i BothLanes(__m128i v) { return _mm256_set_m128i(v, v); }

// Lanes 0..7 summed as ((0+4)+(2+6)) + ((1+5)+(3+7)); every dot ends this way.
inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float HorizontalSum(__m128 v) {
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}

// 8 int32 sums of 4 products each of unsigned u (0..255) and signed s bytes.
// Exact: |u * s| pairs stay within int16 for the ranges used here (u <= 128
// with |s| <= 127).
inline __m256i MulSumU8I8Int(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// The same for two signed vectors: |a| times b with a's sign moved onto b.
// The tile dots keep |a| for all their tokens and sign each token's b.
inline __m256i MulSumI8I8Int(__m256i a, __m256i b) {
  return MulSumU8I8Int(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

// out[0..8) = d_x[i] * d_w: a weight block's scale times the 8 token scales
// of a tile record (act_tile.h), each the product a one-token dot takes.
// out must be 32-byte aligned.
inline void ScaleProducts(const float* d_x, float d_w, float* out) {
  _mm256_store_ps(out, _mm256_mul_ps(_mm256_loadu_ps(d_x), _mm256_set1_ps(d_w)));
}

// --- Float rows ----------------------------------------------------------------

// How the float dots read an element type: 8 values as fp32 (exact), one
// value as fp32. Types, not function pointers, so the loads inline.
struct LoadF32 {
  static __m256 Vector(const float* p) { return _mm256_loadu_ps(p); }
  static float Scalar(float v) { return v; }
};

struct LoadF16 {
  static __m256 Vector(const uint16_t* p) { return _mm256_cvtph_ps(Load128(p)); }
  static float Scalar(uint16_t v) { return Fp16ToFp32(v); }
};

struct LoadBf16 {
  static __m256 Vector(const uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(Load128(p)), 16));
  }
  static float Scalar(uint16_t v) { return Bf16ToFp32(v); }
};

// --- 32-wide blocks ------------------------------------------------------------

// Bytes 0..15: the low nibbles of qs (elements 0..15); 16..31: the high
// nibbles (elements 16..31). Each in 0..15.
inline __m256i UnpackNibbles(const uint8_t* qs) {
  const __m128i bytes = Load128(qs);
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// Byte j = 0xFF where bit j of the little-endian 32-bit qh is set, else 0.
inline __m256i BitsToBytes(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  // Byte j takes byte j / 8 of bits, then tests its bit j % 8.
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// Q5_0/Q5_1's quants with their 5th bit: nibble | (bit << 4), in 0..31.
inline __m256i UnpackQ5(const uint8_t* qs, const uint8_t* qh) {
  const __m256i high = _mm256_and_si256(BitsToBytes(qh), _mm256_set1_epi8(0x10));
  return _mm256_or_si256(UnpackNibbles(qs), high);
}

// --- 256-wide super-blocks -----------------------------------------------------

// scales16 holds 8 int16 values, the same in both 128-bit lanes. Returns a
// vector whose low lane is value a everywhere and high lane value b.
inline __m256i PickScales(__m256i scales16, int a, int b) {
  const __m256i control = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * b)),
                                           _mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * a)));
  return _mm256_shuffle_epi8(scales16, control);
}

// Q4_K/Q5_K: the 8 six-bit scales (bytes 0..7) and mins (bytes 8..15) of a
// packed 12-byte field (the layout UnpackQ4KScaleMin reads, a word at a time).
inline __m128i UnpackQ4KScalesMins(const uint8_t* packed) {
  uint32_t w[3];
  std::memcpy(w, packed, sizeof(w));
  const uint32_t sc_lo = w[0] & 0x3f3f3f3fu;
  const uint32_t sc_hi = (w[2] & 0x0f0f0f0fu) | (((w[0] >> 6) & 0x03030303u) << 4);
  const uint32_t m_lo = w[1] & 0x3f3f3f3fu;
  const uint32_t m_hi = ((w[2] >> 4) & 0x0f0f0f0fu) | (((w[1] >> 6) & 0x03030303u) << 4);
  return _mm_set_epi32(static_cast<int>(m_hi), static_cast<int>(m_lo), static_cast<int>(sc_hi),
                       static_cast<int>(sc_lo));
}

// Sum of mins[j] * (bsums[2j] + bsums[2j + 1]) in 4 int32 lanes; the mins
// are the int16 values in the high lane of scales_mins16.
inline __m128i Q4KMinsTimesSums(__m256i scales_mins16, const int16_t* bsums) {
  const __m256i sums = Load256(bsums);
  const __m128i pair_sums = _mm_hadd_epi16(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
  return _mm_madd_epi16(_mm256_extracti128_si256(scales_mins16, 1), pair_sums);
}

// The 4 int32 lanes of v summed (exact), as Q5_K's dot sums its mins.
inline int SumLanes(__m128i v) {
  v = _mm_add_epi32(v, _mm_unpackhi_epi64(v, v));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(v);
}

// Quarter `quarter` (64 quants) of a Q4_K or Q5_K super-block: elements
// 0..31 in *lo, 32..63 in *hi, each in 0..15 (Q4_K) or 0..31 (Q5_K, with
// the 5th bits from qh).
template <typename Block>
inline void UnpackQ45KQuarter(const Block& blk, int quarter, __m256i* lo, __m256i* hi) {
  static_assert(std::is_same_v<Block, BlockQ4_K> || std::is_same_v<Block, BlockQ5_K>);
  const __m256i m4 = _mm256_set1_epi8(0xF);
  const __m256i bits = Load256(blk.qs + 32 * quarter);
  *lo = _mm256_and_si256(bits, m4);
  *hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
  if constexpr (std::is_same_v<Block, BlockQ5_K>) {
    const __m256i one = _mm256_set1_epi8(1);
    const __m256i high_bits = Load256(blk.qh);
    const int j = 2 * quarter;
    *lo = _mm256_or_si256(*lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits, j), one), 4));
    *hi = _mm256_or_si256(*hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits, j + 1), one), 4));
  }
}

// Q6_K half `half` (128 quants) of a super-block: q6[g] (g = 0..3) gets the
// 32 quants at offset 32g of the half (quant_blocks.h), each in 0..63.
inline void UnpackQ6KHalf(const uint8_t* ql, const uint8_t* qh, int half, __m256i q6[4]) {
  const __m256i m4 = _mm256_set1_epi8(0xF);
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i ql0 = Load256(ql + 64 * half);
  const __m256i ql1 = Load256(ql + 64 * half + 32);
  const __m256i bits = Load256(qh + 32 * half);
  q6[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(bits, m3), 4));
  q6[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bits, 2), m3), 4));
  q6[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m3), 4));
  q6[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bits, 6), m3), 4));
}

// Group g of UnpackQ6KHalf alone (the same quants), for a loop that keeps
// one group in registers at a time.
inline __m256i UnpackQ6KGroup(const uint8_t* ql, const uint8_t* qh, int half, int g) {
  const __m256i m4 = _mm256_set1_epi8(0xF);
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i low_bytes = Load256(ql + 64 * half + 32 * (g % 2));
  const __m256i low = g < 2 ? _mm256_and_si256(low_bytes, m4) : _mm256_and_si256(_mm256_srli_epi16(low_bytes, 4), m4);
  const __m256i top = _mm256_and_si256(_mm256_srli_epi16(Load256(qh + 32 * half), 2 * g), m3);
  return _mm256_or_si256(low, _mm256_slli_epi16(top, 4));
}

// Q3_K: the 16 six-bit scales minus 32, as int8 (the layout UnpackQ3KScale
// reads, a word at a time: low nibbles of s_0..7 in bytes 0..7, of s_8..15
// in their high nibbles; top bits 2 * (j / 4) of byte 8 + j % 4).
inline __m128i UnpackQ3KScales(const uint8_t* packed) {
  uint32_t w[3];
  std::memcpy(w, packed, sizeof(w));
  const uint32_t s0 = (w[0] & 0x0f0f0f0fu) | (((w[2] >> 0) & 0x03030303u) << 4);
  const uint32_t s1 = (w[1] & 0x0f0f0f0fu) | (((w[2] >> 2) & 0x03030303u) << 4);
  const uint32_t s2 = ((w[0] >> 4) & 0x0f0f0f0fu) | (((w[2] >> 4) & 0x03030303u) << 4);
  const uint32_t s3 = ((w[1] >> 4) & 0x0f0f0f0fu) | (((w[2] >> 6) & 0x03030303u) << 4);
  const __m128i s = _mm_set_epi32(static_cast<int>(s3), static_cast<int>(s2), static_cast<int>(s1),
                                  static_cast<int>(s0));
  return _mm_sub_epi8(s, _mm_set1_epi8(32));
}

}  // namespace octo::cpu::avx2

#endif  // defined(__x86_64__)
