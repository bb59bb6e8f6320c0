// AVX2 dot products of the float weight types (F32, F16, BF16 x the same
// type): four 8-lane fp32 accumulators with FMA, as ggml's AVX2 vec_dot_f16
// does; a scalar tail for cols % 32.
#if defined(__x86_64__)

#include <immintrin.h>

#include "kernels/cpu/avx2_blocks.h"
#include "kernels/cpu/type_kernels.h"

namespace octo::cpu {
namespace {

// Load: avx2::LoadF32, LoadF16 or LoadBf16, for T float or uint16_t.
template <typename Load, typename T>
float DotAvx2(const T* w, const T* x, int64_t cols) {
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps();
  __m256 acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= cols; i += 32) {
    acc0 = _mm256_fmadd_ps(Load::Vector(w + i), Load::Vector(x + i), acc0);
    acc1 = _mm256_fmadd_ps(Load::Vector(w + i + 8), Load::Vector(x + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(Load::Vector(w + i + 16), Load::Vector(x + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(Load::Vector(w + i + 24), Load::Vector(x + i + 24), acc3);
  }
  for (; i + 8 <= cols; i += 8) acc0 = _mm256_fmadd_ps(Load::Vector(w + i), Load::Vector(x + i), acc0);
  float sum = avx2::HorizontalSum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; i < cols; ++i) sum += Load::Scalar(w[i]) * Load::Scalar(x[i]);
  return sum;
}

}  // namespace

float VecDotF32Avx2(const void* w, const void* x, int64_t cols) {
  return DotAvx2<avx2::LoadF32>(static_cast<const float*>(w), static_cast<const float*>(x), cols);
}

float VecDotF16Avx2(const void* w, const void* x, int64_t cols) {
  return DotAvx2<avx2::LoadF16>(static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(x), cols);
}

float VecDotBf16Avx2(const void* w, const void* x, int64_t cols) {
  return DotAvx2<avx2::LoadBf16>(static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(x), cols);
}

}  // namespace octo::cpu

#endif  // defined(__x86_64__)
