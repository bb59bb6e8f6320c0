// Token tiles: the activation layout the multi-token dot products read.
//
// In a batch, MatMul dots each weight row with several activation rows. A
// tile dot (VecDotTileFn, type_kernels.h) loads and unpacks a block of the
// weight row once and multiplies it with that block of up to kMaxTileTokens
// tokens before moving on. It reads the tokens' encoded rows (the bytes
// QuantizeActivationRow writes) repacked block-major, so the tokens' blocks
// for one weight block sit side by side:
//
//   Q8_0   record b = the n tokens' block-b scales as fp32 (the side
//          table's d), in kMaxTileTokens slots (the unused ones zero), then
//          their block-b quants, 32 bytes a token (TileQ8_0RecordBytes).
//   Q8_K   record b = BlockQ8_K b of token 0, ..., token n-1 (as encoded).
//   F32,   the n encoded rows one after the other (x itself is an F32
//   F16,   tile: MatMul packs nothing for it).
//   BF16
// Q8_1 has no tile layout (its types keep the one-token dots).
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

// Bytes of one block record of a Q8_0 tile of n tokens: the dot multiplies
// a weight block's scale by all the tokens' scales in one vector.
inline constexpr int64_t TileQ8_0RecordBytes(int n) { return kMaxTileTokens * 4 + kQK * n; }

// Whether `type` has a tile layout.
bool HasActTile(ActType type);

// Bytes of a tile of n tokens of `type` (cols a multiple of its block).
int64_t ActTileBytes(ActType type, int64_t cols, int n);

// Packs n (1..kMaxTileTokens) encoded rows of `type` (row t at
// rows + t * row_stride) into one tile at out. type must have a tile layout.
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
