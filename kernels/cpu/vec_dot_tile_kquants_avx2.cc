// AVX2 tile dots (several tokens per weight row, act_tile.h) of the K-quants
// read against Q8_K: Q4_K, Q5_K and Q6_K.
//
// Each token's result is the bits its one-token dot (vec_dot_kquants_avx2.cc)
// gives. Per super-block that dot builds 8 int32 lanes of scaled integer
// products, then does its float work: acc += (d_x * d_w) * lanes (FMA), the
// mins' term in its own accumulator, lanes summed at the end. Here the
// integer lanes are built for every token of the tile while one piece of the
// weights is unpacked (integer sums: exact in any order, so each token's
// lanes are the same int32s), and the float work is the same per token.
// Q6_K's signed quants q - 32 are kept as |q - 32| with each token's quants
// taking their sign: the same int16 pair products as q * x - 32 * x.
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

template <typename Block, bool kFifthBit, int N>
void DotTileQ45K(const Block* wb, const uint8_t* x, int64_t n_blocks, float* out, int64_t out_stride) {
  __m256 acc[N];
  __m128 acc_mins[N];
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) {
    acc[t] = _mm256_setzero_ps();
    acc_mins[t] = _mm_setzero_ps();
  }
  alignas(32) float d[kMaxTileTokens];
  alignas(32) float neg_dmin[kMaxTileTokens];
  for (int64_t b = 0; b < n_blocks; ++b) {
    const Block& blk = wb[b];
    const TileQ8_KRecord<N> xb{x + b * TileQ8_K::Bytes(N)};
    const __m256i scales_mins16 = _mm256_cvtepu8_epi16(avx2::UnpackQ4KScalesMins(blk.scales));
    const __m256i scales16 = avx2::BothLanes(_mm256_castsi256_si128(scales_mins16));
    const __m128i mins16 = _mm256_extracti128_si256(scales_mins16, 1);

    __m256i sumi[N];
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) sumi[t] = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int quarter = 0; quarter < 4; ++quarter) {
      __m256i q_lo, q_hi;
      avx2::UnpackQ45KQuarter(blk, quarter, &q_lo, &q_hi);
      const __m256i sc_lo = PickScales(scales16, 2 * quarter, 2 * quarter);
      const __m256i sc_hi = PickScales(scales16, 2 * quarter + 1, 2 * quarter + 1);
      #pragma GCC unroll 8
      for (int t = 0; t < N; ++t) {
        const int8_t* q8 = xb.qs(t) + 64 * quarter;
        const __m256i p_lo = _mm256_madd_epi16(sc_lo, _mm256_maddubs_epi16(q_lo, Load256(q8)));
        const __m256i p_hi = _mm256_madd_epi16(sc_hi, _mm256_maddubs_epi16(q_hi, Load256(q8 + 32)));
        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(p_lo, p_hi));
      }
    }

    // The one-token dot's d = d_x * d_w and neg_dmin = -d_x * dmin_w, for
    // every token at once; its mins' products from the pair sums it adds up.
    avx2::ScaleProducts(xb.scales(), F16(blk.d), d);
    avx2::ScaleProducts(xb.scales(), -F16(blk.dmin), neg_dmin);
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) {
      const __m128i mins_prod = _mm_madd_epi16(mins16, avx2::Load128(xb.pair_sums(t)));
      if constexpr (kFifthBit) {  // ggml's Q5_K: one scalar multiply-add per super-block
        acc_mins[t] = _mm_fmadd_ss(_mm_load_ss(&neg_dmin[t]),
                                   _mm_set_ss(static_cast<float>(avx2::SumLanes(mins_prod))), acc_mins[t]);
      } else {
        acc_mins[t] = _mm_fmadd_ps(_mm_broadcast_ss(&neg_dmin[t]), _mm_cvtepi32_ps(mins_prod), acc_mins[t]);
      }
      acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[t]), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
    }
  }
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) out[t * out_stride] = HorizontalSum(acc[t]) + HorizontalSum(acc_mins[t]);
}

template <int N>
void DotTileQ6K(const BlockQ6_K* wb, const uint8_t* x, int64_t n_blocks, float* out, int64_t out_stride) {
  __m256 acc[N];
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) acc[t] = _mm256_setzero_ps();
  alignas(32) float d[kMaxTileTokens];
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ6_K& blk = wb[b];
    const TileQ8_KRecord<N> xb{x + b * TileQ8_K::Bytes(N)};
    const __m256i scales16 = _mm256_cvtepi8_epi16(avx2::Load128(blk.scales));  // sub-blocks 0..7 | 8..15

    __m256i sumi[N];
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) sumi[t] = _mm256_setzero_si256();
    #pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      const __m256i scales_half = avx2::BothLanes(half == 0 ? _mm256_castsi256_si128(scales16)
                                                            : _mm256_extracti128_si256(scales16, 1));
      #pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        const __m256i a = _mm256_sub_epi8(avx2::UnpackQ6KGroup(blk.ql, blk.qh, half, g), _mm256_set1_epi8(32));
        const __m256i abs_a = _mm256_sign_epi8(a, a);
        const __m256i sc = PickScales(scales_half, 2 * g, 2 * g + 1);
        #pragma GCC unroll 8
        for (int t = 0; t < N; ++t) {
          const __m256i q8 = Load256(xb.qs(t) + 128 * half + 32 * g);
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

}  // namespace

void VecDotTileQ4_KAvx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride) {
  WithTileSize(n_x, [&](auto n) {
    DotTileQ45K<BlockQ4_K, false, decltype(n)::value>(static_cast<const BlockQ4_K*>(w),
                                                        static_cast<const uint8_t*>(x_tile), cols / kQKK, out,
                                                        out_stride);
  });
}

void VecDotTileQ5_KAvx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride) {
  WithTileSize(n_x, [&](auto n) {
    DotTileQ45K<BlockQ5_K, true, decltype(n)::value>(static_cast<const BlockQ5_K*>(w),
                                                       static_cast<const uint8_t*>(x_tile), cols / kQKK, out,
                                                       out_stride);
  });
}

void VecDotTileQ6_KAvx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride) {
  WithTileSize(n_x, [&](auto n) {
    DotTileQ6K<decltype(n)::value>(static_cast<const BlockQ6_K*>(w), static_cast<const uint8_t*>(x_tile),
                                   cols / kQKK, out, out_stride);
  });
}

}  // namespace octo::cpu

#endif  // defined(__x86_64__)
