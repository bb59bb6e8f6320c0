// The IQ1_S and IQ1_M dots with Q8_K activations in AVX2, in ggml's AVX2
// order (bit for bit its results): eight int32 lanes per block, lane m the
// scaled grid products ls * t * q8 of the elements at positions 4m..4m+3 of
// every 32; lane by lane fma(d_w * d_x, lane, acc) over the blocks, then
// ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)). The +-1/8 shifts are summed
// apart: IQ1_S's in one float per row (d times the block's integer sum),
// IQ1_M's in eight more lanes; each times 1/8 at the end beside the grid's
// lanes.
//
// Per 32 weights (four groups of 8): the grid's ternary values t (a byte
// table of the 2048 entries, built once) move onto the activations as signs
// (sign_epi8: t * q8, exact since Q8_K's values lie in [-127, 127]); maddubs
// by ones sums neighbouring pairs into int16, and madd by each group's scale
// sums pairs of those into int32 lane m = elements 4m..4m+3, the lanes of
// the lanes above. The activations' own sums, times scale * shift, give
// the +-1/8 shifts' lanes the same way. All of it is exact in integers.
#if defined(__x86_64__)

#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/avx2_blocks.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/type_kernels.h"
#include "kernels/half.h"
#include "kernels/iq_blocks.h"

namespace octo::cpu {
namespace {

// kIq1SGrid's entries as eight int8 values t in {-1, 0, 1}.
const std::array<uint64_t, 2048>& TernaryGrid() {
  static const std::array<uint64_t, 2048> grid = [] {
    std::array<uint64_t, 2048> out{};
    for (size_t i = 0; i < out.size(); ++i) {
      int L[8];
      iq::Iq1Levels(iq::kIq1SGrid[i], 0, L);  // L = 8 t
      for (int j = 0; j < 8; ++j) out[i] |= static_cast<uint64_t>(static_cast<uint8_t>(L[j] / 8)) << (8 * j);
    }
    return out;
  }();
  return grid;
}

// Four 16-bit values, each repeated over the four int16 lanes of its group.
__m256i PerGroup(int a, int b, int c, int d) {
  auto four = [](int v) { return static_cast<int64_t>(0x0001000100010001ull * static_cast<uint16_t>(v)); };
  return _mm256_set_epi64x(four(d), four(c), four(b), four(a));
}

template <typename T>
float VecDotIq1Avx2(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const typename T::Block*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  const std::array<uint64_t, 2048>& grid = TernaryGrid();
  const __m256i ones = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps(), acc_shift = _mm256_setzero_ps();
  float shift_total = 0.0f;
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const typename T::Block& block = wb[b];
    __m256i lane = _mm256_setzero_si256(), lane_shift = _mm256_setzero_si256();
    for (int g = 0; g < kQKK / 8; g += 4) {
      const __m256i t = _mm256_set_epi64x(static_cast<int64_t>(grid[T::GridIndex(block, g + 3)]),
                                          static_cast<int64_t>(grid[T::GridIndex(block, g + 2)]),
                                          static_cast<int64_t>(grid[T::GridIndex(block, g + 1)]),
                                          static_cast<int64_t>(grid[T::GridIndex(block, g)]));
      const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[b].qs + 8 * g));
      const __m256i pairs = _mm256_maddubs_epi16(ones, _mm256_sign_epi8(q8, t));
      const __m256i q_pairs = _mm256_maddubs_epi16(ones, q8);
      __m256i ls, lss;
      if constexpr (std::is_same_v<T, iq::Iq1STraits>) {
        // One scale and shift for the 32 weights.
        const int scale = T::Scale(block, g);
        ls = _mm256_set1_epi16(static_cast<int16_t>(scale));
        lss = _mm256_set1_epi16(static_cast<int16_t>(scale * T::Shift(block, g)));
      } else {
        // IQ1_M: a scale per two groups, a shift per group.
        const int s01 = T::Scale(block, g), s23 = T::Scale(block, g + 2);
        ls = PerGroup(s01, s01, s23, s23);
        lss = PerGroup(s01 * T::Shift(block, g), s01 * T::Shift(block, g + 1), s23 * T::Shift(block, g + 2),
                       s23 * T::Shift(block, g + 3));
      }
      lane = _mm256_add_epi32(lane, _mm256_madd_epi16(pairs, ls));
      lane_shift = _mm256_add_epi32(lane_shift, _mm256_madd_epi16(q_pairs, lss));
    }
    const float d = xb[b].d * Fp16ToFp32(T::DBits(block));
    const __m256 dv = _mm256_set1_ps(d);
    acc = _mm256_fmadd_ps(dv, _mm256_cvtepi32_ps(lane), acc);
    acc_shift = _mm256_fmadd_ps(dv, _mm256_cvtepi32_ps(lane_shift), acc_shift);
    alignas(32) int32_t shifts[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(shifts), lane_shift);
    int32_t shift_sum = 0;
    for (int32_t s : shifts) shift_sum += s;
    shift_total = std::fma(d, static_cast<float>(shift_sum), shift_total);
  }
  if constexpr (std::is_same_v<T, iq::Iq1STraits>) return avx2::HorizontalSum(acc) + T::kFactor * shift_total;
  return avx2::HorizontalSum(acc) + T::kFactor * avx2::HorizontalSum(acc_shift);
}

}  // namespace

float VecDotIq1SAvx2(const void* w, const void* x, int64_t cols) { return VecDotIq1Avx2<iq::Iq1STraits>(w, x, cols); }
float VecDotIq1MAvx2(const void* w, const void* x, int64_t cols) { return VecDotIq1Avx2<iq::Iq1MTraits>(w, x, cols); }

}  // namespace octo::cpu

#endif  // defined(__x86_64__)
