// AVX2 tile dots (several tokens per weight row, act_tile.h) of the 32-wide
// block types: Q4_0, Q5_0, Q8_0 and IQ4_NL (read against Q8_0), Q4_1 and
// Q5_1 (against Q8_1).
//
// Each token's result is the bits its one-token dot (vec_dot_q32_avx2.cc)
// gives: per block the same 8 exact int32 partial sums (each over 4
// consecutive elements), converted and accumulated as acc += (d_w * d_x) *
// partial (FMA) in block order, one accumulator per token (IQ4_NL: its
// even/odd pair and scalar last block), the same lane sum at the end. What
// the tokens share is the weight side: a block is loaded, unpacked to signed
// quants a (Q4_0: n - 8, Q5_0: n - 16, IQ4_NL: the table's values) and made
// |a| once, and each token's quants only take a's sign. sum(|a| * sign(x, a))
// over a group of 4 is the integer sum((n - offset) * x) the one-token dot
// takes as sum(n * x) - offset * sum(x): the same int32, so the same float.
// Q4_1/Q5_1's quants are unsigned, as in their one-token dot, and their
// m_w * s_x terms, one FMA per block in lane 0 of a vector there, are one
// FMA per block for all the tokens here, lane t token t's.
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

// The 8 int32 partial sums of signed weight quants a (|a| = abs_a) and one
// token's quants, as floats.
inline __m256 PartialSums(__m256i a, __m256i abs_a, const int8_t* x_qs) {
  return _mm256_cvtepi32_ps(
      _mm256_madd_epi16(_mm256_maddubs_epi16(abs_a, _mm256_sign_epi8(Load256(x_qs), a)), _mm256_set1_epi16(1)));
}

// n_blocks blocks; unpack(b, &a, &d_w) gives block b's signed quants and
// its fp32 scale. out[t * out_stride] = the dot of the row with token t.
template <int N, typename Unpack>
inline void DotTileQ8_0Act(const void* x_tile, int64_t n_blocks, float* out, int64_t out_stride, Unpack unpack) {
  const auto* x = static_cast<const uint8_t*>(x_tile);
  __m256 acc[N];
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) acc[t] = _mm256_setzero_ps();
  alignas(32) float scales[kMaxTileTokens];
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m256i a;
    float d_w;
    unpack(b, &a, &d_w);
    const __m256i abs_a = _mm256_sign_epi8(a, a);
    const uint8_t* record = x + b * TileQ8_0::Bytes(N);
    avx2::ScaleProducts(reinterpret_cast<const float*>(record + TileQ8_0::Scales()), d_w, scales);
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) {
      const auto* qs = reinterpret_cast<const int8_t*>(record + TileQ8_0::Quants(t));
      acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&scales[t]), PartialSums(a, abs_a, qs), acc[t]);
    }
  }
  // + 0.0f as the one-token dot adds its (here empty) mins term.
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) out[t * out_stride] = HorizontalSum(acc[t]) + 0.0f;
}

// Q4_1/Q5_1: unpack(b, &n, &d_w, &m_w) gives block b's unsigned quants, its
// scale and its min.
template <int N, typename Unpack>
inline void DotTileQ8_1Act(const void* x_tile, int64_t n_blocks, float* out, int64_t out_stride, Unpack unpack) {
  const auto* x = static_cast<const uint8_t*>(x_tile);
  __m256 acc[N];
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) acc[t] = _mm256_setzero_ps();
  __m256 mins = _mm256_setzero_ps();
  alignas(32) float scales[kMaxTileTokens];
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m256i n;
    float d_w, m_w;
    unpack(b, &n, &d_w, &m_w);
    const uint8_t* record = x + b * TileQ8_1::Bytes(N);
    const auto* s_x = reinterpret_cast<const float*>(record + TileQ8_1::Sums());
    mins = _mm256_fmadd_ps(_mm256_set1_ps(m_w), _mm256_loadu_ps(s_x), mins);
    avx2::ScaleProducts(reinterpret_cast<const float*>(record + TileQ8_1::Scales()), d_w, scales);
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) {
      const auto* qs = reinterpret_cast<const int8_t*>(record + TileQ8_1::Quants(t));
      const __m256 lanes = _mm256_cvtepi32_ps(avx2::MulSumU8I8Int(n, Load256(qs)));
      acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&scales[t]), lanes, acc[t]);
    }
  }
  alignas(32) float min_terms[kMaxTileTokens];
  _mm256_store_ps(min_terms, mins);
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) out[t * out_stride] = HorizontalSum(acc[t]) + min_terms[t];
}

}  // namespace

void VecDotTileQ4_1Avx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride) {
  const auto* wb = static_cast<const BlockQ4_1*>(w);
  WithTileSize(n_x, [&](auto n) {
    DotTileQ8_1Act<decltype(n)::value>(x_tile, cols / kQK, out, out_stride,
                                       [&](int64_t b, __m256i* q, float* d, float* m) {
                                         *q = avx2::UnpackNibbles(wb[b].qs);
                                         *d = F16(wb[b].d);
                                         *m = F16(wb[b].m);
                                       });
  });
}

void VecDotTileQ5_1Avx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride) {
  const auto* wb = static_cast<const BlockQ5_1*>(w);
  WithTileSize(n_x, [&](auto n) {
    DotTileQ8_1Act<decltype(n)::value>(x_tile, cols / kQK, out, out_stride,
                                       [&](int64_t b, __m256i* q, float* d, float* m) {
                                         *q = avx2::UnpackQ5(wb[b].qs, wb[b].qh);
                                         *d = F16(wb[b].d);
                                         *m = F16(wb[b].m);
                                       });
  });
}

void VecDotTileQ4_0Avx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride) {
  const auto* wb = static_cast<const BlockQ4_0*>(w);
  WithTileSize(n_x, [&](auto n) {
    DotTileQ8_0Act<decltype(n)::value>(x_tile, cols / kQK, out, out_stride, [&](int64_t b, __m256i* a, float* d) {
      *a = _mm256_sub_epi8(avx2::UnpackNibbles(wb[b].qs), _mm256_set1_epi8(8));
      *d = F16(wb[b].d);
    });
  });
}

void VecDotTileQ5_0Avx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride) {
  const auto* wb = static_cast<const BlockQ5_0*>(w);
  WithTileSize(n_x, [&](auto n) {
    DotTileQ8_0Act<decltype(n)::value>(x_tile, cols / kQK, out, out_stride, [&](int64_t b, __m256i* a, float* d) {
      *a = _mm256_sub_epi8(avx2::UnpackQ5(wb[b].qs, wb[b].qh), _mm256_set1_epi8(16));
      *d = F16(wb[b].d);
    });
  });
}

void VecDotTileQ8_0Avx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride) {
  const auto* wb = static_cast<const BlockQ8_0*>(w);
  WithTileSize(n_x, [&](auto n) {
    DotTileQ8_0Act<decltype(n)::value>(x_tile, cols / kQK, out, out_stride, [&](int64_t b, __m256i* a, float* d) {
      *a = Load256(wb[b].qs);
      *d = F16(wb[b].d);
    });
  });
}

namespace {

// IQ4_NL: even and odd blocks in two accumulators per token, an odd last
// block's integer sum added in scalar (as VecDotIq4NlAvx2).
template <int N>
void DotTileIq4Nl(const BlockIq4Nl* wb, const uint8_t* x, int64_t n_blocks, float* out, int64_t out_stride) {
  const __m256i table = avx2::BothLanes(avx2::Load128(kIq4NlValues));
  __m256 acc[2][N];
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) acc[0][t] = acc[1][t] = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < n_blocks; b += 2) {
    #pragma GCC unroll 2
    for (int parity = 0; parity < 2; ++parity) {
      const BlockIq4Nl& blk = wb[b + parity];
      const __m256i a = _mm256_shuffle_epi8(table, avx2::UnpackNibbles(blk.qs));
      const __m256i abs_a = _mm256_sign_epi8(a, a);
      const float d_w = F16(blk.d);
      const uint8_t* record = x + (b + parity) * TileQ8_0::Bytes(N);
      const auto* d_x = reinterpret_cast<const float*>(record + TileQ8_0::Scales());
      #pragma GCC unroll 8
      for (int t = 0; t < N; ++t) {
        const auto* qs = reinterpret_cast<const int8_t*>(record + TileQ8_0::Quants(t));
        acc[parity][t] = _mm256_fmadd_ps(_mm256_set1_ps(d_w * d_x[t]), PartialSums(a, abs_a, qs), acc[parity][t]);
      }
    }
  }
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) {
    float sum = HorizontalSum(_mm256_add_ps(acc[0][t], acc[1][t]));
    if (b < n_blocks) {
      const BlockIq4Nl& blk = wb[b];
      const uint8_t* record = x + b * TileQ8_0::Bytes(N);
      const float d_x = reinterpret_cast<const float*>(record + TileQ8_0::Scales())[t];
      const auto* qs = reinterpret_cast<const int8_t*>(record + TileQ8_0::Quants(t));
      int isum = 0;
      for (int j = 0; j < kQK / 2; ++j) {
        isum += kIq4NlValues[blk.qs[j] & 0xF] * qs[j] + kIq4NlValues[blk.qs[j] >> 4] * qs[j + kQK / 2];
      }
      sum = _mm_cvtss_f32(
          _mm_fmadd_ss(_mm_set_ss(F16(blk.d) * d_x), _mm_set_ss(static_cast<float>(isum)), _mm_set_ss(sum)));
    }
    out[t * out_stride] = sum;
  }
}

}  // namespace

void VecDotTileIq4NlAvx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride) {
  WithTileSize(n_x, [&](auto n) {
    DotTileIq4Nl<decltype(n)::value>(static_cast<const BlockIq4Nl*>(w), static_cast<const uint8_t*>(x_tile),
                                     cols / kQK, out, out_stride);
  });
}

}  // namespace octo::cpu

#endif  // defined(__x86_64__)
