// AVX2 tile dots (several tokens per weight row, act_tile.h) of the float
// weight types: F32, F16 and BF16, whose tiles hold the tokens' values as
// fp32 rows (the fp16/bf16 activations widened, exactly).
//
// Each token's result is the bits its one-token dot (vec_dot_float_avx2.cc)
// gives: four 8-lane accumulators over 32-wide steps, then 8-wide steps
// into the first, the four summed as (acc0 + acc1) + (acc2 + acc3) and
// across the lanes, then the scalar tail (product, then sum). The widening
// of a weight vector is shared by a group of tokens (three at a time, their
// twelve accumulators in registers); each token's products and sums are its
// own.
#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/act_tile.h"
#include "kernels/cpu/avx2_blocks.h"
#include "kernels/cpu/type_kernels.h"
#include "kernels/half.h"

namespace octo::cpu {
namespace {

constexpr int kGroup = 3;  // tokens sharing a widened weight vector

struct LoadF32 {
  static __m256 Vector(const float* p) { return _mm256_loadu_ps(p); }
  static float Scalar(float v) { return v; }
};

struct LoadF16 {
  static __m256 Vector(const uint16_t* p) { return _mm256_cvtph_ps(avx2::Load128(p)); }
  static float Scalar(uint16_t v) { return Fp16ToFp32(v); }
};

struct LoadBf16 {
  static __m256 Vector(const uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(avx2::Load128(p)), 16));
  }
  static float Scalar(uint16_t v) { return Bf16ToFp32(v); }
};

// Tokens x[0..G) (fp32 rows of cols values) against the weight row w.
template <typename Load, int G, typename T>
void DotGroup(const T* w, const float* const* x, int64_t cols, float* out, int64_t out_stride) {
  __m256 acc[G][4];
  for (int t = 0; t < G; ++t) {
    for (int k = 0; k < 4; ++k) acc[t][k] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 32 <= cols; i += 32) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256 wk = Load::Vector(w + i + 8 * k);
#pragma GCC unroll 3
      for (int t = 0; t < G; ++t) acc[t][k] = _mm256_fmadd_ps(wk, _mm256_loadu_ps(x[t] + i + 8 * k), acc[t][k]);
    }
  }
  for (; i + 8 <= cols; i += 8) {
    const __m256 w8 = Load::Vector(w + i);
    for (int t = 0; t < G; ++t) acc[t][0] = _mm256_fmadd_ps(w8, _mm256_loadu_ps(x[t] + i), acc[t][0]);
  }
  for (int t = 0; t < G; ++t) {
    float sum = avx2::HorizontalSum(
        _mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]), _mm256_add_ps(acc[t][2], acc[t][3])));
    for (int64_t j = i; j < cols; ++j) sum += Load::Scalar(w[j]) * x[t][j];
    out[t * out_stride] = sum;
  }
}

template <typename Load, typename T>
void DotTileFloat(const void* w_row, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride) {
  const auto* w = static_cast<const T*>(w_row);
  const auto* x = static_cast<const float*>(x_tile);
  for (int t0 = 0; t0 < n_x; t0 += kGroup) {
    const float* rows[kGroup];
    for (int t = 0; t < kGroup; ++t) rows[t] = x + (t0 + std::min(t, n_x - t0 - 1)) * cols;
    float* group_out = out + t0 * out_stride;
    switch (n_x - t0) {
      case 1: DotGroup<Load, 1>(w, rows, cols, group_out, out_stride); break;
      case 2: DotGroup<Load, 2>(w, rows, cols, group_out, out_stride); break;
      default: DotGroup<Load, kGroup>(w, rows, cols, group_out, out_stride); break;
    }
  }
}

}  // namespace

void VecDotTileF32Avx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride) {
  DotTileFloat<LoadF32, float>(w, x_tile, n_x, cols, out, out_stride);
}

void VecDotTileF16Avx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride) {
  DotTileFloat<LoadF16, uint16_t>(w, x_tile, n_x, cols, out, out_stride);
}

void VecDotTileBf16Avx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride) {
  DotTileFloat<LoadBf16, uint16_t>(w, x_tile, n_x, cols, out, out_stride);
}

}  // namespace octo::cpu

#endif  // defined(__x86_64__)
