// AVX2 activation encoders: the same bytes as the portable ones in
// quantize_activation.cc (the contract is in quantize_activation.h).
#if defined(__x86_64__)

#include <immintrin.h>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quantize_activation.h"
#include "kernels/half.h"

namespace octo::cpu {
namespace {

// Quantizes 32 values; returns d (fp32) and, through *sum, the sum of the q.
inline float QuantizeBlock8Avx2(const float* x, uint16_t* d_out, int8_t* qs, int* sum) {
  __m256 v0 = _mm256_loadu_ps(x);
  __m256 v1 = _mm256_loadu_ps(x + 8);
  __m256 v2 = _mm256_loadu_ps(x + 16);
  __m256 v3 = _mm256_loadu_ps(x + 24);

  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  __m256 max_abs = _mm256_andnot_ps(sign_bit, v0);
  max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_bit, v1));
  max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_bit, v2));
  max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_bit, v3));
  __m128 max4 = _mm_max_ps(_mm256_extractf128_ps(max_abs, 1), _mm256_castps256_ps128(max_abs));
  max4 = _mm_max_ps(max4, _mm_movehl_ps(max4, max4));
  max4 = _mm_max_ss(max4, _mm_movehdup_ps(max4));
  const float amax = _mm_cvtss_f32(max4);

  const float d = amax / 127.0f;
  *d_out = Fp32ToFp16(d);
  const __m256 mul = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);

  // Round half to even (the MXCSR default is not relied on: explicit mode).
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, mul), kRound));
  const __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, mul), kRound));
  const __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, mul), kRound));
  const __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, mul), kRound));

  if (sum != nullptr) {
    const __m256i s8 = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
    s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
    *sum = _mm_cvtsi128_si32(s4);
  }

  // int32 -> int16 -> int8; the packs work per 128-bit lane, so the dwords
  // come out as 0 4 1 5 2 6 3 7 and one permute puts them back in order.
  const __m256i p01 = _mm256_packs_epi32(i0, i1);
  const __m256i p23 = _mm256_packs_epi32(i2, i3);
  const __m256i bytes = _mm256_packs_epi16(p01, p23);
  const __m256i ordered = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), ordered);
  return d;
}

}  // namespace

void QuantizeRowQ8_0Avx2(const float* x, int64_t cols, void* out) {
  auto* y = static_cast<BlockQ8_0*>(out);
  for (int64_t b = 0; b < cols / kQK; ++b) QuantizeBlock8Avx2(x + b * kQK, &y[b].d, y[b].qs, nullptr);
  FillQ8_0Side(cols, out);  // derived from the blocks: the same code as portable
}

void QuantizeRowQ8_1Avx2(const float* x, int64_t cols, void* out) {
  auto* y = static_cast<BlockQ8_1*>(out);
  for (int64_t b = 0; b < cols / kQK; ++b) {
    int sum = 0;
    const float d = QuantizeBlock8Avx2(x + b * kQK, &y[b].d, y[b].qs, &sum);
    y[b].s = Fp32ToFp16(d * static_cast<float>(sum));
  }
}

void QuantizeRowF16Avx2(const float* x, int64_t cols, void* out) {
  auto* y = static_cast<uint16_t*>(out);
  int64_t i = 0;
  for (; i + 8 <= cols; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < cols; ++i) y[i] = Fp32ToFp16(x[i]);
}

}  // namespace octo::cpu

#endif  // defined(__x86_64__)
