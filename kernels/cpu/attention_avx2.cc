// AVX2 inner loops of cpu::Attention (see attention_kernels.h). This file is
// compiled with -mavx2 -mfma -mf16c; nothing here runs unless the caller
// asked for Simd::kAvx2.
#include <cmath>
#include <cstdint>

#include "kernels/cpu/attention_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace octo::cpu {
namespace {

inline __m256 LoadFp16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Four independent accumulators over 32-wide steps (to hide the FMA latency),
// then 8-wide steps, then the scalar tail.
float DotAvx2(const float* q, const uint16_t* k, int n) {
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps();
  __m256 acc3 = _mm256_setzero_ps();
  int d = 0;
  for (; d + 32 <= n; d += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), LoadFp16x8(k + d), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8), LoadFp16x8(k + d + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 16), LoadFp16x8(k + d + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 24), LoadFp16x8(k + d + 24), acc3);
  }
  for (; d + 8 <= n; d += 8) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), LoadFp16x8(k + d), acc0);
  }
  float sum = HorizontalSum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; d < n; ++d) sum += q[d] * _cvtsh_ss(k[d]);
  return sum;
}

void AccumulateAvx2(float a, const uint16_t* v, float* acc, int n) {
  const __m256 va = _mm256_set1_ps(a);
  int d = 0;
  for (; d + 8 <= n; d += 8) {
    _mm256_storeu_ps(acc + d, _mm256_fmadd_ps(va, LoadFp16x8(v + d), _mm256_loadu_ps(acc + d)));
  }
  for (; d < n; ++d) acc[d] = std::fma(a, _cvtsh_ss(v[d]), acc[d]);
}

}  // namespace

AttentionKernels Avx2AttentionKernels() { return {DotAvx2, AccumulateAvx2}; }

}  // namespace octo::cpu

#endif  // defined(__x86_64__)
