// AVX2 tile dots (several tokens per weight row, act_tile.h) of the
// remaining types read against Q8_K: Q2_K, Q3_K and IQ4_XS.
//
// As in vec_dot_tile_kquants_avx2.cc: each token gets the bits of its
// one-token dot (vec_dot_kquants_avx2.cc). A super-block's weights are
// unpacked once, each token's 8 int32 lanes built from them (integer sums,
// exact in any order), and each token's float work done as the one-token dot
// does it, in the same order (Q2_K: its mins' term, then the scaled sum, into
// one accumulator). Q3_K's q = low - 4 * (high bit clear) is kept signed,
// as |q| with each token's quants taking q's sign: the same int16 pair
// products as low * x - 4 * x.
#if defined(__x86_64__)

#include <immintrin.h>

#include "kernels/cpu/act_tile.h"
#include "kernels/cpu/avx2_blocks.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/type_kernels.h"

namespace octo::cpu {
namespace {

using avx2::F16;
using avx2::HorizontalSum;
using avx2::Load256;
using avx2::PickScales;

// The int16 scales of one half (sub-blocks 8 * half .. 8 * half + 7) of a
// 16-scale super-block, in both 128-bit lanes.
inline __m256i HalfScales(__m256i scales16, int half) {
  return avx2::BothLanes(half == 0 ? _mm256_castsi256_si128(scales16) : _mm256_extracti128_si256(scales16, 1));
}

template <int N>
void DotTileQ2K(const BlockQ2_K* wb, const uint8_t* x, int64_t n_blocks, float* out, int64_t out_stride) {
  const __m256i m3 = _mm256_set1_epi8(3);
  __m256 acc[N];
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) acc[t] = _mm256_setzero_ps();
  alignas(32) float d[kMaxTileTokens];
  alignas(32) float neg_dmin[kMaxTileTokens];
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ2_K& blk = wb[b];
    const TileQ8_KRecord<N> xb{x + b * TileQ8_K::Bytes(N)};
    const __m128i packed = avx2::Load128(blk.scales);
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0xF)));
    const __m256i scales16 = _mm256_cvtepu8_epi16(_mm_and_si128(packed, _mm_set1_epi8(0xF)));
    // The one-token dot's neg_dmin = -d_x * dmin_w and d = d_x * d_w, for
    // every token at once.
    avx2::ScaleProducts(xb.scales(), -F16(blk.dmin), neg_dmin);
    avx2::ScaleProducts(xb.scales(), F16(blk.d), d);
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) {
      const __m256i mins_prod = _mm256_madd_epi16(mins16, Load256(xb.bsums(t)));
      acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&neg_dmin[t]), _mm256_cvtepi32_ps(mins_prod), acc[t]);
    }

    __m256i sumi[N];
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) sumi[t] = _mm256_setzero_si256();
    #pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      const __m256i scales_half = HalfScales(scales16, half);
      const __m256i bits = Load256(blk.qs + 32 * half);
      #pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * s), m3);
        const __m256i sc = PickScales(scales_half, 2 * s, 2 * s + 1);
        #pragma GCC unroll 8
        for (int t = 0; t < N; ++t) {
          const __m256i p16 = _mm256_maddubs_epi16(q2, Load256(xb.qs(t) + 128 * half + 32 * s));
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(sc, p16));
        }
      }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[t]), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
    }
  }
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) out[t * out_stride] = HorizontalSum(acc[t]);
}

template <int N>
void DotTileQ3K(const BlockQ3_K* wb, const uint8_t* x, int64_t n_blocks, float* out, int64_t out_stride) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i one = _mm256_set1_epi8(1);
  __m256 acc[N];
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) acc[t] = _mm256_setzero_ps();
  alignas(32) float d[kMaxTileTokens];
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ3_K& blk = wb[b];
    const TileQ8_KRecord<N> xb{x + b * TileQ8_K::Bytes(N)};
    const __m256i scales16 = _mm256_cvtepi8_epi16(avx2::UnpackQ3KScales(blk.scales));
    // Inverted high bits: hmask bit clear means q - 4.
    const __m256i not_high = _mm256_xor_si256(Load256(blk.hmask), _mm256_set1_epi8(-1));

    __m256i sumi[N];
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) sumi[t] = _mm256_setzero_si256();
    #pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      const __m256i scales_half = HalfScales(scales16, half);
      const __m256i bits = Load256(blk.qs + 32 * half);
      #pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        const int k = 4 * half + s;
        const __m256i low = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * s), m3);
        const __m256i minus4 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(not_high, k), one), 2);
        const __m256i a = _mm256_sub_epi8(low, minus4);  // -4..3
        const __m256i abs_a = _mm256_sign_epi8(a, a);
        const __m256i sc = PickScales(scales_half, 2 * s, 2 * s + 1);
        #pragma GCC unroll 8
        for (int t = 0; t < N; ++t) {
          const __m256i q8 = Load256(xb.qs(t) + 128 * half + 32 * s);
          const __m256i p16 = _mm256_maddubs_epi16(abs_a, _mm256_sign_epi8(q8, a));
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(sc, p16));
        }
      }
    }
    avx2::ScaleProducts(xb.scales(), F16(blk.d), d);
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[t]), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
    }
  }
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) out[t * out_stride] = HorizontalSum(acc[t]);
}

template <int N>
void DotTileIq4Xs(const BlockIq4Xs* wb, const uint8_t* x, int64_t n_blocks, float* out, int64_t out_stride) {
  const __m256i table = avx2::BothLanes(avx2::Load128(kIq4NlValues));
  __m256 acc[N];
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) acc[t] = _mm256_setzero_ps();
  alignas(32) float d[kMaxTileTokens];
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockIq4Xs& blk = wb[b];
    const TileQ8_KRecord<N> xb{x + b * TileQ8_K::Bytes(N)};
    __m256i sumi[N];
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) sumi[t] = _mm256_setzero_si256();
    #pragma GCC unroll 8
    for (int j = 0; j < kQKK / 32; ++j) {
      const __m256i a = _mm256_shuffle_epi8(table, avx2::UnpackNibbles(blk.qs + 16 * j));
      const __m256i abs_a = _mm256_sign_epi8(a, a);
      const __m256i ls = _mm256_set1_epi16(static_cast<int16_t>(UnpackIq4XsScale(blk, j) - 32));
      #pragma GCC unroll 8
      for (int t = 0; t < N; ++t) {
        const __m256i p16 = _mm256_maddubs_epi16(abs_a, _mm256_sign_epi8(Load256(xb.qs(t) + 32 * j), a));
        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p16, ls));
      }
    }
    avx2::ScaleProducts(xb.scales(), F16(blk.d), d);
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[t]), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
    }
  }
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) out[t * out_stride] = HorizontalSum(acc[t]);
}

}  // namespace

void VecDotTileQ2_KAvx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride) {
  WithTileSize(n_x, [&](auto n) {
    DotTileQ2K<decltype(n)::value>(static_cast<const BlockQ2_K*>(w), static_cast<const uint8_t*>(x_tile),
                                   cols / kQKK, out, out_stride);
  });
}

void VecDotTileQ3_KAvx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride) {
  WithTileSize(n_x, [&](auto n) {
    DotTileQ3K<decltype(n)::value>(static_cast<const BlockQ3_K*>(w), static_cast<const uint8_t*>(x_tile),
                                   cols / kQKK, out, out_stride);
  });
}

void VecDotTileIq4XsAvx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride) {
  WithTileSize(n_x, [&](auto n) {
    DotTileIq4Xs<decltype(n)::value>(static_cast<const BlockIq4Xs*>(w), static_cast<const uint8_t*>(x_tile),
                                     cols / kQKK, out, out_stride);
  });
}

}  // namespace octo::cpu

#endif  // defined(__x86_64__)
