// AVX2 dot products of the 32-wide block types with Q8_0 / Q8_1 activations.
// One block is one 32-byte vector of weight quants against the 32 activation
// quants: maddubs + madd give 8 exact int32 partial sums (each over 4
// consecutive elements; for Q4_0/Q5_0 the weights' offset is taken off with
// the Q8_0 row's side table, quant_blocks.h), which are converted
// to float and accumulated as acc += (d_w * d_x) * partial (FMA), summed
// across the lanes at the end: ggml's AVX2 order, block by block in one
// accumulator (IQ4_NL: even and odd blocks in two, an odd last block added
// in scalar), so a row's result is the one llama.cpp's vec_dot gives.
// (llama.cpp's AVX2 build repacks Q4_0 weights and runs another kernel,
// ggml_gemv_q4_0_8x8_q8_0, whose order is one scalar FMA per block of the
// block's whole integer sum. Emulating it made one more reference prompt
// bit-exact but cost 37% of this kernel's speed; not done.)
#if defined(__x86_64__)

#include <immintrin.h>

#include "kernels/cpu/avx2_blocks.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/type_kernels.h"

namespace octo::cpu {
namespace {

using avx2::F16;
using avx2::HorizontalSum;
using avx2::UnpackNibbles;

// avx2::MulSumU8I8Int / MulSumI8I8Int's 8 int32 sums, as floats.
inline __m256 MulSumU8I8(__m256i u, __m256i s) { return _mm256_cvtepi32_ps(avx2::MulSumU8I8Int(u, s)); }
inline __m256 MulSumI8I8(__m256i a, __m256i b) { return _mm256_cvtepi32_ps(avx2::MulSumI8I8Int(a, b)); }

inline __m256 Scale(uint16_t d_w, uint16_t d_x) { return _mm256_set1_ps(F16(d_w) * F16(d_x)); }

// Runs block(b, &acc, &mins) over every block in order, one accumulator
// (as ggml's AVX2 kernels for these types: the same FMA chain, so the same
// float result); returns the lane sum of acc plus lane 0 of mins (which
// only Q4_1/Q5_1 use, for their m_w * s_x terms).
template <typename Block>
inline float Accumulate(int64_t n_blocks, Block block) {
  __m256 acc = _mm256_setzero_ps();
  __m128 mins = _mm_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) block(b, &acc, &mins);
  return HorizontalSum(acc) + _mm_cvtss_f32(mins);
}

inline __m256i LoadQ8(const int8_t* qs) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs)); }

// The Q8_0 row's side table (quant_blocks.h).
inline const Q8_0Side* SideOf(const void* x, int64_t cols) {
  return reinterpret_cast<const Q8_0Side*>(static_cast<const uint8_t*>(x) + Q8_0SideOffset(cols));
}

// 8 int32 lanes of sum((n - offset) * q_x) over groups of 4, for unsigned
// weight quants n: sum(n * q_x) - offset * sum(q_x), the second from the
// side table (shift = log2(offset)). The same integers MulSumI8I8 gives for
// the signed n - offset.
template <int kShift>
inline __m256 MulSumOffset(__m256i n, __m256i qx, const int32_t* sums4) {
  const __m256i prod = _mm256_madd_epi16(_mm256_maddubs_epi16(n, qx), _mm256_set1_epi16(1));
  const __m256i offset = _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums4)), kShift);
  return _mm256_cvtepi32_ps(_mm256_sub_epi32(prod, offset));
}

}  // namespace

float VecDotQ4_0Avx2(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockQ4_0*>(w);
  const auto* xb = static_cast<const BlockQ8_0*>(x);
  const Q8_0Side* side = SideOf(x, cols);
  return Accumulate(cols / kQK, [&](int64_t b, __m256* acc, __m128* mins) {
    const __m256 scale = _mm256_set1_ps(F16(wb[b].d) * side[b].d);
    *acc = _mm256_fmadd_ps(scale, MulSumOffset<3>(UnpackNibbles(wb[b].qs), LoadQ8(xb[b].qs), side[b].sums4), *acc);
  });
}

float VecDotQ4_1Avx2(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockQ4_1*>(w);
  const auto* xb = static_cast<const BlockQ8_1*>(x);
  return Accumulate(cols / kQK, [&](int64_t b, __m256* acc, __m128* mins) {
    *mins = _mm_fmadd_ss(_mm_set_ss(F16(wb[b].m)), _mm_set_ss(F16(xb[b].s)), *mins);
    *acc = _mm256_fmadd_ps(Scale(wb[b].d, xb[b].d), MulSumU8I8(UnpackNibbles(wb[b].qs), LoadQ8(xb[b].qs)), *acc);
  });
}

float VecDotQ5_0Avx2(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockQ5_0*>(w);
  const auto* xb = static_cast<const BlockQ8_0*>(x);
  const Q8_0Side* side = SideOf(x, cols);
  return Accumulate(cols / kQK, [&](int64_t b, __m256* acc, __m128* mins) {
    const __m256i n = avx2::UnpackQ5(wb[b].qs, wb[b].qh);  // q + 16, in 0..31
    const __m256 scale = _mm256_set1_ps(F16(wb[b].d) * side[b].d);
    *acc = _mm256_fmadd_ps(scale, MulSumOffset<4>(n, LoadQ8(xb[b].qs), side[b].sums4), *acc);
  });
}

float VecDotQ5_1Avx2(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockQ5_1*>(w);
  const auto* xb = static_cast<const BlockQ8_1*>(x);
  return Accumulate(cols / kQK, [&](int64_t b, __m256* acc, __m128* mins) {
    *mins = _mm_fmadd_ss(_mm_set_ss(F16(wb[b].m)), _mm_set_ss(F16(xb[b].s)), *mins);
    const __m256i qw = avx2::UnpackQ5(wb[b].qs, wb[b].qh);
    *acc = _mm256_fmadd_ps(Scale(wb[b].d, xb[b].d), MulSumU8I8(qw, LoadQ8(xb[b].qs)), *acc);
  });
}

float VecDotQ8_0Avx2(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockQ8_0*>(w);
  const auto* xb = static_cast<const BlockQ8_0*>(x);
  const Q8_0Side* side = SideOf(x, cols);
  return Accumulate(cols / kQK, [&](int64_t b, __m256* acc, __m128* mins) {
    const __m256 scale = _mm256_set1_ps(F16(wb[b].d) * side[b].d);
    *acc = _mm256_fmadd_ps(scale, MulSumI8I8(LoadQ8(wb[b].qs), LoadQ8(xb[b].qs)), *acc);
  });
}

namespace {

// A 32-wide nibble block through a 16-entry int8 table (IQ4_NL, MXFP4):
// the table shuffled in per nibble, exact int sums per block, blocks in
// two accumulators; `scale(block)` is the weight block's float scale.
template <typename Block, typename Scale>
float NibbleTableDotAvx2(const void* w, const void* x, int64_t cols, const int8_t* levels, Scale scale) {
  const auto* wb = static_cast<const Block*>(w);
  const auto* xb = static_cast<const BlockQ8_0*>(x);
  const Q8_0Side* side = SideOf(x, cols);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels)));
  auto lanes = [&](int64_t b) { return MulSumI8I8(_mm256_shuffle_epi8(table, UnpackNibbles(wb[b].qs)), LoadQ8(xb[b].qs)); };
  const int64_t n_blocks = cols / kQK;
  __m256 acc_even = _mm256_setzero_ps();
  __m256 acc_odd = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < n_blocks; b += 2) {
    acc_even = _mm256_fmadd_ps(_mm256_set1_ps(scale(wb[b]) * side[b].d), lanes(b), acc_even);
    acc_odd = _mm256_fmadd_ps(_mm256_set1_ps(scale(wb[b + 1]) * side[b + 1].d), lanes(b + 1), acc_odd);
  }
  float sum = HorizontalSum(_mm256_add_ps(acc_even, acc_odd));
  if (b < n_blocks) {  // the last of an odd count: its integer sum, scaled
    int isum = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      isum += levels[wb[b].qs[j] & 0xF] * xb[b].qs[j] + levels[wb[b].qs[j] >> 4] * xb[b].qs[j + kQK / 2];
    }
    sum = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(scale(wb[b]) * side[b].d), _mm_set_ss(static_cast<float>(isum)),
                                     _mm_set_ss(sum)));
  }
  return sum;
}

}  // namespace

float VecDotIq4NlAvx2(const void* w, const void* x, int64_t cols) {
  return NibbleTableDotAvx2<BlockIq4Nl>(w, x, cols, kIq4NlValues, [](const BlockIq4Nl& b) { return F16(b.d); });
}

float VecDotMxfp4Avx2(const void* w, const void* x, int64_t cols) {
  return NibbleTableDotAvx2<BlockMxfp4>(w, x, cols, kMxfp4Values,
                                        [](const BlockMxfp4& b) { return E8M0Half(b.e); });
}

}  // namespace octo::cpu

#endif  // defined(__x86_64__)
