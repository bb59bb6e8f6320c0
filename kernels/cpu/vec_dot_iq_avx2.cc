// The IQ2/IQ3 dots with Q8_K activations in AVX2, in ggml's AVX2 order (bit
// for bit its results): per 32 weights the grid bytes (unsigned) times the
// activations with the weights' signs moved onto them (maddubs), madd by the
// group's scale into eight int32 lanes, fma into float lanes per block, the
// type's factor at the end. IQ1_S and IQ1_M: vec_dot_iq1_avx2.cc.
#if defined(__x86_64__)

#include <immintrin.h>

#include <array>
#include <cstdint>

#include "kernels/cpu/avx2_blocks.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/type_kernels.h"
#include "kernels/half.h"
#include "kernels/iq_blocks.h"

namespace octo::cpu {

using namespace avx2;

namespace {

// A grid's entries as their magnitude bytes (8 of them, or 4 for IQ3), and
// sign bytes of +1 / -1: for a 7-bit index (the 8th sign the even-count one)
// or a whole sign byte.
template <size_t N, typename Level>
std::array<uint64_t, N> ExpandGrid(const uint16_t (&codes)[N], int width, Level level) {
  std::array<uint64_t, N> out{};
  for (size_t i = 0; i < N; ++i) {
    for (int j = 0; j < width; ++j) out[i] |= static_cast<uint64_t>(level(codes[i], j)) << (8 * j);
  }
  return out;
}
uint64_t SignByte(int signs) {
  uint64_t out = 0;
  for (int j = 0; j < 8; ++j) out |= static_cast<uint64_t>((signs >> j) & 1 ? 0xFF : 0x01) << (8 * j);
  return out;
}

int Iq2Magnitude(uint16_t code, int j) { return iq::Iq2Level(code, 0, j); }

struct Tables {
  std::array<uint64_t, 256> iq2xxs = ExpandGrid(iq::kIq2XxsGrid, 8, Iq2Magnitude);
  std::array<uint64_t, 512> iq2xs = ExpandGrid(iq::kIq2XsGrid, 8, Iq2Magnitude);
  std::array<uint64_t, 1024> iq2s = ExpandGrid(iq::kIq2SGrid, 8, Iq2Magnitude);
  std::array<uint64_t, 256> iq3xxs = ExpandGrid(iq::kIq3XxsGrid, 4, iq::Iq3XxsLevel);
  std::array<uint64_t, 512> iq3s = ExpandGrid(iq::kIq3SGrid, 4, iq::Iq3SLevel);
  std::array<uint64_t, 256> signs = [] {
    std::array<uint64_t, 256> out{};
    for (int i = 0; i < 256; ++i) out[i] = SignByte(i);
    return out;
  }();
  uint64_t Even(int seven) const { return signs[iq::EvenSigns(seven)]; }
};
const Tables& T() {
  static const Tables tables;
  return tables;
}

// One 32-weight sub-block: magnitudes, signs, and the 16 int16 scales of its
// byte pairs.
struct SubBlock {
  __m256i q, signs, scales;
};

__m256i Four(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return _mm256_set_epi64x(static_cast<int64_t>(d), static_cast<int64_t>(c), static_cast<int64_t>(b),
                           static_cast<int64_t>(a));
}
// Per-16 scales: the first 16 bytes' pairs take `low`, the rest `high`.
__m256i Scales(int low, int high) { return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(high)), _mm_set1_epi16(static_cast<int16_t>(low))); }

SubBlock LoadIq2Xxs(const Tables& t, const BlockIq2Xxs& b, int ib) {
  const uint16_t* qs = b.qs + 4 * ib;
  const uint32_t idx = qs[0] | (static_cast<uint32_t>(qs[1]) << 16), aux = qs[2] | (static_cast<uint32_t>(qs[3]) << 16);
  const int ls = 2 * static_cast<int>(aux >> 28) + 1;
  return {Four(t.iq2xxs[idx & 0xFF], t.iq2xxs[(idx >> 8) & 0xFF], t.iq2xxs[(idx >> 16) & 0xFF], t.iq2xxs[idx >> 24]),
          Four(t.Even(aux & 127), t.Even((aux >> 7) & 127), t.Even((aux >> 14) & 127), t.Even((aux >> 21) & 127)),
          _mm256_set1_epi16(static_cast<int16_t>(ls))};
}

SubBlock LoadIq2Xs(const Tables& t, const BlockIq2Xs& b, int ib) {
  const uint16_t* qs = b.qs + 4 * ib;
  return {Four(t.iq2xs[qs[0] & 511], t.iq2xs[qs[1] & 511], t.iq2xs[qs[2] & 511], t.iq2xs[qs[3] & 511]),
          Four(t.Even(qs[0] >> 9), t.Even(qs[1] >> 9), t.Even(qs[2] >> 9), t.Even(qs[3] >> 9)),
          Scales(iq::Scale16(b.scales, 4 * ib), iq::Scale16(b.scales, 4 * ib + 2))};
}

SubBlock LoadIq2S(const Tables& t, const BlockIq2S& b, int ib) {
  const uint8_t* qs = b.qs + 4 * ib;
  const int qh = b.qh[ib];
  auto index = [&](int l) { return qs[l] | ((qh << (8 - 2 * l)) & 0x300); };
  const uint8_t* s = b.qs + 32 + 4 * ib;
  return {Four(t.iq2s[index(0)], t.iq2s[index(1)], t.iq2s[index(2)], t.iq2s[index(3)]),
          Four(t.signs[s[0]], t.signs[s[1]], t.signs[s[2]], t.signs[s[3]]),
          Scales(iq::Scale16(b.scales, 4 * ib), iq::Scale16(b.scales, 4 * ib + 2))};
}

SubBlock LoadIq3Xxs(const Tables& t, const BlockIq3Xxs& b, int ib) {
  const uint8_t* qs = b.qs + 8 * ib;
  const uint32_t aux = iq::LoadU32(b.qs + 64 + 4 * ib);
  auto pair = [&](int l) { return t.iq3xxs[qs[2 * l]] | (t.iq3xxs[qs[2 * l + 1]] << 32); };
  const int ls = 2 * static_cast<int>(aux >> 28) + 1;
  return {Four(pair(0), pair(1), pair(2), pair(3)),
          Four(t.Even(aux & 127), t.Even((aux >> 7) & 127), t.Even((aux >> 14) & 127), t.Even((aux >> 21) & 127)),
          _mm256_set1_epi16(static_cast<int16_t>(ls))};
}

SubBlock LoadIq3S(const Tables& t, const BlockIq3S& b, int ib) {
  const uint8_t* qs = b.qs + 8 * ib;
  const int qh = b.qh[ib];
  auto pair = [&](int l) {
    return t.iq3s[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)] | (t.iq3s[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)] << 32);
  };
  const uint8_t* s = b.signs + 4 * ib;
  return {Four(pair(0), pair(1), pair(2), pair(3)), Four(t.signs[s[0]], t.signs[s[1]], t.signs[s[2]], t.signs[s[3]]),
          _mm256_set1_epi16(static_cast<int16_t>(iq::Iq3STraits::Scale(b, 4 * ib)))};
}

template <typename Block, SubBlock (*kLoad)(const Tables&, const Block&, int)>
float IqDotAvx2(const void* w, const void* x, int64_t cols, uint16_t (*d_bits)(const Block&), float factor) {
  const auto* wb = static_cast<const Block*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  const Tables& t = T();
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    __m256i sum = _mm256_setzero_si256();
    for (int ib = 0; ib < kQKK / 32; ++ib) {
      const SubBlock s = kLoad(t, wb[b], ib);
      const __m256i dot = _mm256_maddubs_epi16(s.q, _mm256_sign_epi8(Load256(xb[b].qs + 32 * ib), s.signs));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(dot, s.scales));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(F16(d_bits(wb[b])) * xb[b].d), _mm256_cvtepi32_ps(sum), acc);
  }
  return factor * HorizontalSum(acc);
}

}  // namespace

float VecDotIq2XxsAvx2(const void* w, const void* x, int64_t cols) {
  return IqDotAvx2<BlockIq2Xxs, LoadIq2Xxs>(w, x, cols, iq::Iq2XxsTraits::DBits, iq::Iq2XxsTraits::kFactor);
}
float VecDotIq2XsAvx2(const void* w, const void* x, int64_t cols) {
  return IqDotAvx2<BlockIq2Xs, LoadIq2Xs>(w, x, cols, iq::Iq2XsTraits::DBits, iq::Iq2XsTraits::kFactor);
}
float VecDotIq2SAvx2(const void* w, const void* x, int64_t cols) {
  return IqDotAvx2<BlockIq2S, LoadIq2S>(w, x, cols, iq::Iq2STraits::DBits, iq::Iq2STraits::kFactor);
}
float VecDotIq3XxsAvx2(const void* w, const void* x, int64_t cols) {
  return IqDotAvx2<BlockIq3Xxs, LoadIq3Xxs>(w, x, cols, iq::Iq3XxsTraits::DBits, iq::Iq3XxsTraits::kFactor);
}
float VecDotIq3SAvx2(const void* w, const void* x, int64_t cols) {
  return IqDotAvx2<BlockIq3S, LoadIq3S>(w, x, cols, iq::Iq3STraits::DBits, iq::Iq3STraits::kFactor);
}

}  // namespace octo::cpu

#endif  // defined(__x86_64__)
