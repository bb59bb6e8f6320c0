// Token tiles: the activation layout the multi-token dot products read.
//
// In a batch, MatMul dots each weight row with several activation rows. A
// tile dot (VecDotTileFn, type_kernels.h) loads and unpacks a block of the
// weight row once and multiplies it with that block of up to kMaxTileTokens
// tokens before moving on. It reads the tokens' encoded rows (the bytes
// QuantizeActivationRow writes) repacked block-major, so the tokens' blocks
// for one weight block sit side by side, one record per block:
//
//   Q8_0   TileQ8_0: the n tokens' block scales, then their quants.
//   Q8_1   TileQ8_1: the n tokens' block scales and block sums s, then
//          their quants.
//   Q8_K   TileQ8_K: the n tokens' scales, bsums, pair sums of the bsums,
//          then their quants.
// The scales of all the tokens come first in kMaxTileTokens fp32 slots (the
// unused ones zero), so a dot multiplies a weight block's scale by every
// token's in one vector (fp16 scales widened, exactly).
//   F32,   the n encoded rows one after the other (x itself is an F32
//   F16,   tile: MatMul packs nothing for it).
//   BF16
//
// A tile of n tokens takes ActTileBytes(type, cols, n) bytes.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quantize_activation.h"

namespace octo::cpu {

// Tokens per tile: an accumulator per token stays in a register (AVX2 has
// 16), and the weight unpacking is shared eight ways.
inline constexpr int kMaxTileTokens = 8;

// Byte offsets inside one block record of a Q8_0 tile of n tokens.
struct TileQ8_0 {
  static constexpr int64_t Scales() { return 0; }  // float[kMaxTileTokens]: d as fp32
  static constexpr int64_t Quants(int t) { return kMaxTileTokens * 4 + kQK * t; }  // int8[32] of token t
  static constexpr int64_t Bytes(int n) { return Quants(n); }
};

// Byte offsets inside one block record of a Q8_1 tile of n tokens.
struct TileQ8_1 {
  static constexpr int64_t Scales() { return 0; }                // float[kMaxTileTokens]: d as fp32
  static constexpr int64_t Sums() { return kMaxTileTokens * 4; }  // float[kMaxTileTokens]: s as fp32
  static constexpr int64_t Quants(int t) { return kMaxTileTokens * 8 + kQK * t; }  // int8[32] of token t
  static constexpr int64_t Bytes(int n) { return Quants(n); }
};

// Byte offsets inside one super-block record of a Q8_K tile of n tokens.
struct TileQ8_K {
  static constexpr int64_t Scales() { return 0; }  // float[kMaxTileTokens]: d
  // int16[16] of token t: BlockQ8_K's bsums (sums over 16 values).
  static constexpr int64_t Bsums(int t) { return kMaxTileTokens * 4 + 32 * t; }
  // int16[8] of token t: bsums[2j] + bsums[2j + 1], the sums over 32 values
  // that Q4_K/Q5_K's sub-block mins multiply.
  static constexpr int64_t PairSums(int n, int t) { return Bsums(n) + 16 * t; }
  static constexpr int64_t Quants(int n, int t) { return PairSums(n, n) + kQKK * t; }  // int8[256]
  static constexpr int64_t Bytes(int n) { return Quants(n, n); }
};

// Reads one super-block record of a Q8_K tile of N tokens.
template <int N>
struct TileQ8_KRecord {
  const uint8_t* p;
  const float* scales() const { return reinterpret_cast<const float*>(p + TileQ8_K::Scales()); }
  const int16_t* bsums(int t) const { return reinterpret_cast<const int16_t*>(p + TileQ8_K::Bsums(t)); }
  const int16_t* pair_sums(int t) const { return reinterpret_cast<const int16_t*>(p + TileQ8_K::PairSums(N, t)); }
  const int8_t* qs(int t) const { return reinterpret_cast<const int8_t*>(p + TileQ8_K::Quants(N, t)); }
};

// Bytes of a tile of n tokens of `type` (cols a multiple of its block).
int64_t ActTileBytes(ActType type, int64_t cols, int n);

// Packs n (1..kMaxTileTokens) encoded rows of `type` (row t at
// rows + t * row_stride) into one tile at out.
void PackActTile(ActType type, const uint8_t* rows, int64_t row_stride, int n, int64_t cols, uint8_t* out);

// Calls kernel(std::integral_constant<int, n>{}) for n in 1..kMaxTileTokens:
// a tile dot is compiled once per tile size, its per-token accumulators an
// array the compiler keeps in registers.
template <typename Kernel>
inline void WithTileSize(int n, Kernel&& kernel) {
  static_assert(kMaxTileTokens == 8);
  switch (n) {
    case 1: kernel(std::integral_constant<int, 1>{}); return;
    case 2: kernel(std::integral_constant<int, 2>{}); return;
    case 3: kernel(std::integral_constant<int, 3>{}); return;
    case 4: kernel(std::integral_constant<int, 4>{}); return;
    case 5: kernel(std::integral_constant<int, 5>{}); return;
    case 6: kernel(std::integral_constant<int, 6>{}); return;
    case 7: kernel(std::integral_constant<int, 7>{}); return;
    case 8: kernel(std::integral_constant<int, 8>{}); return;
    default: return;
  }
}

}  // namespace octo::cpu
