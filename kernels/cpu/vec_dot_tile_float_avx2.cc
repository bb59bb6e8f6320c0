// AVX2 tile dots (several tokens per weight row, act_tile.h) of the float
// weight types: F32, F16 and BF16, whose tiles hold the tokens' encoded rows
// one after the other.
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

namespace octo::cpu {
namespace {

using avx2::LoadBf16;
using avx2::LoadF16;
using avx2::LoadF32;

constexpr int kGroup = 3;  // tokens sharing a widened weight vector

// Tokens x[0..G) (rows of cols values) against the weight row w.
template <typename Load, int G, typename T>
void DotGroup(const T* w, const T* const* x, int64_t cols, float* out, int64_t out_stride) {
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
      for (int t = 0; t < G; ++t) acc[t][k] = _mm256_fmadd_ps(wk, Load::Vector(x[t] + i + 8 * k), acc[t][k]);
    }
  }
  for (; i + 8 <= cols; i += 8) {
    const __m256 w8 = Load::Vector(w + i);
    for (int t = 0; t < G; ++t) acc[t][0] = _mm256_fmadd_ps(w8, Load::Vector(x[t] + i), acc[t][0]);
  }
  for (int t = 0; t < G; ++t) {
    float sum = avx2::HorizontalSum(
        _mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]), _mm256_add_ps(acc[t][2], acc[t][3])));
    for (int64_t j = i; j < cols; ++j) sum += Load::Scalar(w[j]) * Load::Scalar(x[t][j]);
    out[t * out_stride] = sum;
  }
}

template <typename Load, typename T>
void DotTileFloat(const void* w_row, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride) {
  const auto* w = static_cast<const T*>(w_row);
  const auto* x = static_cast<const T*>(x_tile);
  for (int t0 = 0; t0 < n_x; t0 += kGroup) {
    const T* rows[kGroup];
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
