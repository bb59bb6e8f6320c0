// AVX2 dot products of the 256-wide types with Q8_K activations.
//
// The integer work per super-block is exact and lands in 8 int32 lanes:
// maddubs multiplies unsigned weight quants by the signed activation quants
// into int16 pairs (no saturation: at most 2 * 63 * 127), madd multiplies
// those by the sub-block scales into int32. The float work is as ggml's AVX2
// kernels: acc += (d_x * d_w) * lanes (FMA), the mins' term in its own
// accumulator, lanes summed at the end.
#if defined(__x86_64__)

#include <immintrin.h>

#include "kernels/cpu/avx2_blocks.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/type_kernels.h"

namespace octo::cpu {
namespace {

using avx2::BothLanes;
using avx2::F16;
using avx2::HorizontalSum;
using avx2::Load128;
using avx2::Load256;
using avx2::PickScales;

// Q2_K, Q3_K, Q6_K: a super-block is 16 sub-blocks of 16 values, in two
// halves of 128 quants. `products(half, p16)` fills p16[k] with the int16 pair
// products (maddubs) of the half's quants 32k .. 32k + 31, whose low 128-bit
// lane is one sub-block and whose high lane the next. Returns the sum over
// both halves of madd(sub-block scale, products); scales16 holds the 16
// scales as int16 (sub-blocks 0..7 | 8..15). Integer work, exact.
template <typename Products>
inline __m256i SumScaledHalves(__m256i scales16, Products products) {
  __m256i sum = _mm256_setzero_si256();
  #pragma GCC unroll 2
  for (int half = 0; half < 2; ++half) {
    const __m256i scales_half = BothLanes(half == 0 ? _mm256_castsi256_si128(scales16)
                                                    : _mm256_extracti128_si256(scales16, 1));
    __m256i p16[4];
    products(half, p16);
    #pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(PickScales(scales_half, 2 * k, 2 * k + 1), p16[k]));
    }
  }
  return sum;
}

}  // namespace

float VecDotQ2_KAvx2(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockQ2_K*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  const __m256i m3 = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const BlockQ2_K& blk = wb[b];
    const float d = xb[b].d * F16(blk.d);
    const float neg_dmin = -xb[b].d * F16(blk.dmin);

    const __m128i packed = Load128(blk.scales);
    const __m128i scales8 = _mm_and_si128(packed, _mm_set1_epi8(0xF));
    const __m128i mins8 = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0xF));
    const __m256i mins_prod = _mm256_madd_epi16(_mm256_cvtepu8_epi16(mins8), Load256(xb[b].bsums));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(neg_dmin), _mm256_cvtepi32_ps(mins_prod), acc);

    const __m256i scales16 = _mm256_cvtepu8_epi16(scales8);  // sub-blocks 0..7 | 8..15
    const __m256i sumi = SumScaledHalves(scales16, [&](int half, __m256i p16[4]) {
      const __m256i bits = Load256(blk.qs + 32 * half);
      const int8_t* q8 = xb[b].qs + 128 * half;
      #pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * s), m3);
        p16[s] = _mm256_maddubs_epi16(q2, Load256(q8 + 32 * s));
      }
    });
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return HorizontalSum(acc);
}

float VecDotQ3_KAvx2(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockQ3_K*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i one = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const BlockQ3_K& blk = wb[b];
    const float d = xb[b].d * F16(blk.d);

    const __m256i scales16 = _mm256_cvtepi8_epi16(avx2::UnpackQ3KScales(blk.scales));

    // Inverted high bits: hmask bit clear means q - 4.
    const __m256i not_high = _mm256_xor_si256(Load256(blk.hmask), _mm256_set1_epi8(-1));
    const __m256i sumi = SumScaledHalves(scales16, [&](int half, __m256i p16[4]) {
      const __m256i bits = Load256(blk.qs + 32 * half);
      const int8_t* q8 = xb[b].qs + 128 * half;
      #pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        const int k = 4 * half + s;
        const __m256i low = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * s), m3);
        const __m256i minus4 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(not_high, k), one), 2);
        const __m256i q8v = Load256(q8 + 32 * s);
        p16[s] = _mm256_sub_epi16(_mm256_maddubs_epi16(low, q8v), _mm256_maddubs_epi16(minus4, q8v));
      }
    });
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return HorizontalSum(acc);
}

namespace {

template <typename Block, bool kFifthBit>
float DotQ45KAvx2(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const Block*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_mins = _mm_setzero_ps();
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const Block& blk = wb[b];
    const float d = xb[b].d * F16(blk.d);
    const float neg_dmin = -xb[b].d * F16(blk.dmin);

    const __m256i scales_mins16 = _mm256_cvtepu8_epi16(avx2::UnpackQ4KScalesMins(blk.scales));
    const __m128i mins_prod = avx2::Q4KMinsTimesSums(scales_mins16, xb[b].bsums);
    if constexpr (kFifthBit) {
      // ggml's Q5_K: the four products summed as integers, then one scalar
      // multiply-add per super-block.
      acc_mins = _mm_fmadd_ss(_mm_set_ss(neg_dmin), _mm_set_ss(static_cast<float>(avx2::SumLanes(mins_prod))),
                              acc_mins);
    } else {
      acc_mins = _mm_fmadd_ps(_mm_set1_ps(neg_dmin), _mm_cvtepi32_ps(mins_prod), acc_mins);  // ggml's Q4_K
    }
    const __m256i scales16 = BothLanes(_mm256_castsi256_si128(scales_mins16));

    const int8_t* q8 = xb[b].qs;
    __m256i sumi = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int quarter = 0; quarter < 4; ++quarter) {
      __m256i q_lo, q_hi;
      avx2::UnpackQ45KQuarter(blk, quarter, &q_lo, &q_hi);
      const __m256i p_lo = _mm256_maddubs_epi16(q_lo, Load256(q8 + 64 * quarter));
      const __m256i p_hi = _mm256_maddubs_epi16(q_hi, Load256(q8 + 64 * quarter + 32));
      const int sub = 2 * quarter;
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(PickScales(scales16, sub, sub), p_lo));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(PickScales(scales16, sub + 1, sub + 1), p_hi));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return HorizontalSum(acc) + HorizontalSum(acc_mins);
}

}  // namespace

float VecDotQ4_KAvx2(const void* w, const void* x, int64_t cols) { return DotQ45KAvx2<BlockQ4_K, false>(w, x, cols); }

float VecDotQ5_KAvx2(const void* w, const void* x, int64_t cols) { return DotQ45KAvx2<BlockQ5_K, true>(w, x, cols); }

float VecDotQ6_KAvx2(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  const __m256i m32 = _mm256_set1_epi8(32);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const BlockQ6_K& blk = wb[b];
    const float d = xb[b].d * F16(blk.d);
    const __m256i scales16 = _mm256_cvtepi8_epi16(Load128(blk.scales));
    const __m256i sumi = SumScaledHalves(scales16, [&](int half, __m256i p16[4]) {
      __m256i q6[4];
      avx2::UnpackQ6KHalf(blk.ql, blk.qh, half, q6);
      const int8_t* q8 = xb[b].qs + 128 * half;
      #pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        const __m256i q8v = Load256(q8 + 32 * g);
        // (q - 32) * q8 as q * q8 - 32 * q8, both within int16.
        p16[g] = _mm256_sub_epi16(_mm256_maddubs_epi16(q6[g], q8v), _mm256_maddubs_epi16(m32, q8v));
      }
    });
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return HorizontalSum(acc);
}

float VecDotIq4XsAvx2(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockIq4Xs*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  const __m256i table = BothLanes(Load128(kIq4NlValues));
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const BlockIq4Xs& blk = wb[b];
    __m256i sumi = _mm256_setzero_si256();
    #pragma GCC unroll 8
    for (int j = 0; j < kQKK / 32; ++j) {
      const __m256i qw = _mm256_shuffle_epi8(table, avx2::UnpackNibbles(blk.qs + 16 * j));
      const __m256i q8v = Load256(xb[b].qs + 32 * j);
      const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(q8v, qw));
      const int16_t ls = static_cast<int16_t>(UnpackIq4XsScale(blk, j) - 32);
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, _mm256_set1_epi16(ls)));
    }
    const float d = F16(blk.d) * xb[b].d;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return HorizontalSum(acc);
}

}  // namespace octo::cpu

#endif  // defined(__x86_64__)
