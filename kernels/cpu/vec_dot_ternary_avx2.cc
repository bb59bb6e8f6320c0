// TQ1_0's and TQ2_0's dots with Q8_K activations in AVX2, in ggml's AVX2
// order (bit for bit its results): t + 1 (0..2) times the quants through
// maddubs, 16-bit pair sums less the bsums, madd into eight int32 lanes
// (lane m: the elements at positions 4m..4m+3 of every 32), fma of each
// lane times d_x * d_w into float lanes per block, the lanes added pairwise
// at the end (HorizontalSum).
#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/avx2_blocks.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/type_kernels.h"

namespace octo::cpu {

using namespace avx2;

namespace {

// Digit n of every byte of v (quant_blocks.h's Tq1Digit), in 16-bit halves:
// (byte * 3^n mod 256) * 3 >> 8.
__m256i Tq1Digits(__m256i v, int pow3) {
  const __m256i low_byte = _mm256_set1_epi16(0x00FF);
  const __m256i scale = _mm256_set1_epi16(static_cast<int16_t>(pow3)), three = _mm256_set1_epi16(3);
  __m256i even = _mm256_and_si256(_mm256_mullo_epi16(_mm256_and_si256(v, low_byte), scale), low_byte);
  __m256i odd = _mm256_and_si256(_mm256_mullo_epi16(_mm256_srli_epi16(v, 8), scale), low_byte);
  even = _mm256_srli_epi16(_mm256_mullo_epi16(even, three), 8);
  odd = _mm256_srli_epi16(_mm256_mullo_epi16(odd, three), 8);
  return _mm256_or_si256(even, _mm256_slli_epi16(odd, 8));
}

// sum + the 16-bit pair sums of digits (0..2) times the activation quants.
__m256i AddProducts(__m256i sum, __m256i digits, const int8_t* q8) {
  return _mm256_add_epi16(sum, _mm256_maddubs_epi16(digits, Load256(q8)));
}

}  // namespace

float VecDotTq1_0Avx2(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockTq1_0*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  constexpr int kPow3[5] = {1, 3, 9, 27, 81};
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const BlockTq1_0& blk = wb[b];
    const int8_t* q8 = xb[b].qs;
    __m256i sum = _mm256_setzero_si256();
    // qs[0..32): digit n is elements 32n..32n+31.
    const __m256i head = Load256(blk.qs);
    for (int n = 0; n < 5; ++n) sum = AddProducts(sum, Tq1Digits(head, kPow3[n]), q8 + 32 * n);
    // qs[32..48): digit n is elements 160 + 16n..; qh: digit n of qh[m] is 240 + 4n + m.
    const __m256i tail = BothLanes(Load128(blk.qs + 32));
    // [digit 0 | digit 1], [digit 2 | digit 3] of the 16 tail bytes.
    sum = AddProducts(sum, _mm256_blend_epi32(Tq1Digits(tail, 1), Tq1Digits(tail, 3), 0xF0), q8 + 160);
    sum = AddProducts(sum, _mm256_blend_epi32(Tq1Digits(tail, 9), Tq1Digits(tail, 27), 0xF0), q8 + 192);
    alignas(16) uint8_t qh_digits[16];
    for (int n = 0; n < 4; ++n) {
      for (int m = 0; m < 4; ++m) qh_digits[4 * n + m] = static_cast<uint8_t>(Tq1Digit(blk.qh[m], n));
    }
    const __m256i last = _mm256_set_m128i(_mm_load_si128(reinterpret_cast<const __m128i*>(qh_digits)),
                                          _mm256_castsi256_si128(Tq1Digits(tail, 81)));
    sum = AddProducts(sum, last, q8 + 224);
    sum = _mm256_sub_epi16(sum, Load256(xb[b].bsums));
    sum = _mm256_madd_epi16(sum, _mm256_set1_epi16(1));
    const __m256 d = _mm256_set1_ps(xb[b].d * F16(blk.d));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), d, acc);
  }
  return HorizontalSum(acc);
}

float VecDotTq2_0Avx2(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockTq2_0*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  const __m256i three = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    __m256i sum0 = _mm256_setzero_si256(), sum1 = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const __m256i q = Load256(wb[b].qs + 32 * half);
      const int8_t* q8 = xb[b].qs + 128 * half;
      const __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(q, three), Load256(q8));
      const __m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 2), three), Load256(q8 + 32));
      const __m256i p2 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), three), Load256(q8 + 64));
      const __m256i p3 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 6), three), Load256(q8 + 96));
      sum0 = _mm256_add_epi16(sum0, _mm256_add_epi16(p0, p1));
      sum1 = _mm256_add_epi16(sum1, _mm256_add_epi16(p2, p3));
    }
    __m256i sum = _mm256_sub_epi16(_mm256_add_epi16(sum0, sum1), Load256(xb[b].bsums));
    sum = _mm256_madd_epi16(sum, _mm256_set1_epi16(1));
    const __m256 d = _mm256_set1_ps(xb[b].d * F16(wb[b].d));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), d, acc);
  }
  return HorizontalSum(acc);
}

}  // namespace octo::cpu

#endif  // defined(__x86_64__)
