// TQ2_0's dot with Q8_K activations in AVX2, in ggml's AVX2 order (so bit
// for bit VecDotTq2_0Lanes: see vec_dot_ternary.cc): t + 1 (0..2) times the
// quants through maddubs, 16-bit pair sums less the bsums, madd into eight
// int32 lanes, fma into the float lanes per block.
#if defined(__x86_64__)

#include <immintrin.h>

#include "kernels/cpu/avx2_blocks.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/type_kernels.h"

namespace octo::cpu {

using namespace avx2;

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
