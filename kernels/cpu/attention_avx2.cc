// AVX2 loops of cpu::Attention (see attention_kernels.h). This file is
// compiled with -mavx2 -mfma -mf16c; nothing here runs unless the caller
// asked for Simd::kAvx2.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/attention_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace octo::cpu {
namespace {

// Eight values of a row, widened to float: fp16 bits or (a decoded
// quantized row) floats; and one.
inline __m256 Load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
inline float Load1(const uint16_t* p) { return _cvtsh_ss(*p); }
inline float Load1(const float* p) { return *p; }

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Four accumulators over 32-wide steps (to hide the FMA latency), then 8-wide
// steps, then the scalar tail. The products are exact, so fusing them changes
// nothing; the order of the sum is what differs from the portable loop.
template <typename Row>
inline float Dot(const float* q, const Row* k, int n) {
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps();
  __m256 acc3 = _mm256_setzero_ps();
  int d = 0;
  for (; d + 32 <= n; d += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), Load8(k + d), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8), Load8(k + d + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 16), Load8(k + d + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 24), Load8(k + d + 24), acc3);
  }
  for (; d + 8 <= n; d += 8) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), Load8(k + d), acc0);
  }
  float sum = HorizontalSum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; d < n; ++d) sum += q[d] * Load1(k + d);
  return sum;
}

template <typename Row>
void ScoresAvx2(const float* q, const Row* k, size_t row_stride, int n_ctx, int head_dim,
                float scale, float* att) {
  for (int pos = 0; pos < n_ctx; ++pos) att[pos] = Dot(q, k + pos * row_stride, head_dim) * scale;
}

// Dimension-outer: a slice of 32 output dimensions stays in four registers
// while the loop runs over every position, so nothing is stored until the
// end, and each 64-byte piece of a value row is read once. Every element is
// still summed in position order. The accumulators start from out (the
// caller's +0.0 gives the bits setzero would).
template <typename Row>
void WeightedSumAvx2(const float* att, const Row* v, size_t row_stride, int n_ctx,
                     int head_dim, float* out) {
  int d = 0;
  for (; d + 32 <= head_dim; d += 32) {
    __m256 acc0 = _mm256_loadu_ps(out + d);
    __m256 acc1 = _mm256_loadu_ps(out + d + 8);
    __m256 acc2 = _mm256_loadu_ps(out + d + 16);
    __m256 acc3 = _mm256_loadu_ps(out + d + 24);
    const Row* v_d = v + d;
    for (int pos = 0; pos < n_ctx; ++pos) {
      const __m256 a = _mm256_broadcast_ss(att + pos);
      const Row* row = v_d + pos * row_stride;
      acc0 = _mm256_fmadd_ps(a, Load8(row), acc0);
      acc1 = _mm256_fmadd_ps(a, Load8(row + 8), acc1);
      acc2 = _mm256_fmadd_ps(a, Load8(row + 16), acc2);
      acc3 = _mm256_fmadd_ps(a, Load8(row + 24), acc3);
    }
    _mm256_storeu_ps(out + d, acc0);
    _mm256_storeu_ps(out + d + 8, acc1);
    _mm256_storeu_ps(out + d + 16, acc2);
    _mm256_storeu_ps(out + d + 24, acc3);
  }
  for (; d + 8 <= head_dim; d += 8) {
    __m256 acc = _mm256_loadu_ps(out + d);
    for (int pos = 0; pos < n_ctx; ++pos) {
      acc = _mm256_fmadd_ps(_mm256_broadcast_ss(att + pos), Load8(v + d + pos * row_stride),
                            acc);
    }
    _mm256_storeu_ps(out + d, acc);
  }
  for (; d < head_dim; ++d) {
    float acc = out[d];
    for (int pos = 0; pos < n_ctx; ++pos) {
      acc = std::fma(att[pos], Load1(v + d + pos * row_stride), acc);
    }
    out[d] = acc;
  }
}

// One 32-value block of T decoded into out (32 floats): the scalar
// decoder's floats (int to float is exact; one multiply, and for Q4_1 one
// add, each rounded as the scalar expression rounds it: no FMA).
template <GgmlType T>
inline void DecodeBlockAvx2(const uint8_t* block, float* out) {
  const __m256 d = _mm256_set1_ps(block_decode::HalfBits(static_cast<uint16_t>(block[0] | block[1] << 8)));
  __m256i q[4];  // values 8i .. 8i + 7 as int32
  if constexpr (T == GgmlType::kQ8_0) {
    const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
    const __m128i lo = _mm256_castsi256_si128(qs), hi = _mm256_extracti128_si256(qs, 1);
    q[0] = _mm256_cvtepi8_epi32(lo);
    q[1] = _mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8));
    q[2] = _mm256_cvtepi8_epi32(hi);
    q[3] = _mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8));
  } else {
    // Q4_0 and Q4_1: 16 bytes of nibbles after the scale(s); values j < 16
    // are the low nibbles.
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + (T == GgmlType::kQ4_0 ? 2 : 4)));
    const __m128i mask = _mm_set1_epi8(0x0F);
    __m128i low = _mm_and_si128(packed, mask), high = _mm_and_si128(_mm_srli_epi16(packed, 4), mask);
    if constexpr (T == GgmlType::kQ4_0) {
      low = _mm_sub_epi8(low, _mm_set1_epi8(8));
      high = _mm_sub_epi8(high, _mm_set1_epi8(8));
    }
    q[0] = _mm256_cvtepi8_epi32(low);
    q[1] = _mm256_cvtepi8_epi32(_mm_srli_si128(low, 8));
    q[2] = _mm256_cvtepi8_epi32(high);
    q[3] = _mm256_cvtepi8_epi32(_mm_srli_si128(high, 8));
  }
  for (int i = 0; i < 4; ++i) {
    __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(q[i]), d);
    if constexpr (T == GgmlType::kQ4_1) {
      v = _mm256_add_ps(v, _mm256_set1_ps(block_decode::HalfBits(static_cast<uint16_t>(block[2] | block[3] << 8))));
    }
    _mm256_storeu_ps(out + 8 * i, v);
  }
}

// Whole blocks (a head that starts and ends on block edges, as every
// head_dim of 32, 64, 128 ... does) with the block decoder above; any other
// span with the scalar one.
void DecodeKvRowsAvx2(GgmlType type, const uint8_t* rows, size_t row_bytes, int n_rows, int first, int head_dim,
                      float* out) {
  if (first % 32 != 0 || head_dim % 32 != 0) return DecodeKvRows(type, rows, row_bytes, n_rows, first, head_dim, out);
  kv_blocks::Visit(type, [&](auto t) {
    constexpr GgmlType T = decltype(t)::value;
    if constexpr (T == GgmlType::kF16) {
      DecodeKvRowsOf<T>(rows, row_bytes, n_rows, first, head_dim, out);
    } else {
      constexpr size_t kBlockBytes = block_decode::Decoder<T>::kBytes;
      for (int r = 0; r < n_rows; ++r) {
        const uint8_t* block = rows + r * row_bytes + static_cast<size_t>(first / 32) * kBlockBytes;
        for (int d = 0; d < head_dim; d += 32, block += kBlockBytes) DecodeBlockAvx2<T>(block, out + r * head_dim + d);
      }
    }
  });
}

}  // namespace

AttentionKernels Avx2AttentionKernels() {
  return {ScoresAvx2<uint16_t>, WeightedSumAvx2<uint16_t>, ScoresAvx2<float>, WeightedSumAvx2<float>,
          DecodeKvRowsAvx2};
}

}  // namespace octo::cpu

#endif  // defined(__x86_64__)
