// AVX2 dot products of the float weight types (F32, F16, BF16 x the same
// type): four 8-lane fp32 accumulators with FMA, as ggml's AVX2 vec_dot_f16
// does; a scalar tail for cols % 32.
#if defined(__x86_64__)

#include <immintrin.h>

#include "kernels/cpu/type_kernels.h"
#include "kernels/half.h"

namespace octo::cpu {
namespace {

inline __m256 LoadF32(const float* p) { return _mm256_loadu_ps(p); }

inline __m256 LoadF16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline __m256 LoadBf16(const uint16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Load(p) gives 8 floats from element pointer p; Scalar(p) one float.
template <typename T, typename Load, typename Scalar>
float DotAvx2(const T* w, const T* x, int64_t cols, Load load, Scalar scalar) {
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps();
  __m256 acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= cols; i += 32) {
    acc0 = _mm256_fmadd_ps(load(w + i), load(x + i), acc0);
    acc1 = _mm256_fmadd_ps(load(w + i + 8), load(x + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(load(w + i + 16), load(x + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(load(w + i + 24), load(x + i + 24), acc3);
  }
  for (; i + 8 <= cols; i += 8) acc0 = _mm256_fmadd_ps(load(w + i), load(x + i), acc0);
  float sum = HorizontalSum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; i < cols; ++i) sum += scalar(w[i]) * scalar(x[i]);
  return sum;
}

}  // namespace

float VecDotF32Avx2(const void* w, const void* x, int64_t cols) {
  return DotAvx2(static_cast<const float*>(w), static_cast<const float*>(x), cols, LoadF32,
                 [](float v) { return v; });
}

float VecDotF16Avx2(const void* w, const void* x, int64_t cols) {
  return DotAvx2(static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(x), cols, LoadF16,
                 Fp16ToFp32);
}

float VecDotBf16Avx2(const void* w, const void* x, int64_t cols) {
  return DotAvx2(static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(x), cols, LoadBf16,
                 Bf16ToFp32);
}

}  // namespace octo::cpu

#endif  // defined(__x86_64__)
