// Packing of token tiles (the layout is in act_tile.h).
#include "kernels/cpu/act_tile.h"

#include <cstring>

#include "kernels/half.h"

namespace octo::cpu {

int64_t ActTileBytes(ActType type, int64_t cols, int n) {
  switch (type) {
    case ActType::kQ8_0: return cols / kQK * TileQ8_0::Bytes(n);
    case ActType::kQ8_K: return cols / kQKK * TileQ8_K::Bytes(n);
    case ActType::kF32:
    case ActType::kF16:
    case ActType::kBF16: return ActRowBytes(type, cols) * n;
    case ActType::kQ8_1: return cols / kQK * TileQ8_1::Bytes(n);
  }
  return 0;
}

void PackActTile(ActType type, const uint8_t* rows, int64_t row_stride, int n, int64_t cols, uint8_t* out) {
  switch (type) {
    case ActType::kQ8_0: {
      for (int64_t b = 0; b < cols / kQK; ++b) {
        uint8_t* record = out + b * TileQ8_0::Bytes(n);
        float d[kMaxTileTokens] = {};
        for (int t = 0; t < n; ++t) {
          const uint8_t* row = rows + t * row_stride;
          d[t] = reinterpret_cast<const Q8_0Side*>(row + Q8_0SideOffset(cols))[b].d;
          std::memcpy(record + TileQ8_0::Quants(t), reinterpret_cast<const BlockQ8_0*>(row)[b].qs, kQK);
        }
        std::memcpy(record + TileQ8_0::Scales(), d, sizeof(d));
      }
      return;
    }
    case ActType::kQ8_K: {
      for (int64_t b = 0; b < cols / kQKK; ++b) {
        uint8_t* record = out + b * TileQ8_K::Bytes(n);
        float d[kMaxTileTokens] = {};
        for (int t = 0; t < n; ++t) {
          const BlockQ8_K& block = reinterpret_cast<const BlockQ8_K*>(rows + t * row_stride)[b];
          d[t] = block.d;
          int16_t pair_sums[kQKK / 32];
          for (int j = 0; j < kQKK / 32; ++j) {
            pair_sums[j] = static_cast<int16_t>(block.bsums[2 * j] + block.bsums[2 * j + 1]);
          }
          std::memcpy(record + TileQ8_K::Bsums(t), block.bsums, sizeof(block.bsums));
          std::memcpy(record + TileQ8_K::PairSums(n, t), pair_sums, sizeof(pair_sums));
          std::memcpy(record + TileQ8_K::Quants(n, t), block.qs, sizeof(block.qs));
        }
        std::memcpy(record + TileQ8_K::Scales(), d, sizeof(d));
      }
      return;
    }
    case ActType::kF32:
    case ActType::kF16:
    case ActType::kBF16: {
      const int64_t row_bytes = ActRowBytes(type, cols);
      for (int t = 0; t < n; ++t) std::memcpy(out + t * row_bytes, rows + t * row_stride, row_bytes);
      return;
    }
    case ActType::kQ8_1: {
      for (int64_t b = 0; b < cols / kQK; ++b) {
        uint8_t* record = out + b * TileQ8_1::Bytes(n);
        float d[kMaxTileTokens] = {};
        float s[kMaxTileTokens] = {};
        for (int t = 0; t < n; ++t) {
          const BlockQ8_1& block = reinterpret_cast<const BlockQ8_1*>(rows + t * row_stride)[b];
          d[t] = Fp16ToFp32(block.d);
          s[t] = Fp16ToFp32(block.s);
          std::memcpy(record + TileQ8_1::Quants(t), block.qs, kQK);
        }
        std::memcpy(record + TileQ8_1::Scales(), d, sizeof(d));
        std::memcpy(record + TileQ8_1::Sums(), s, sizeof(s));
      }
      return;
    }
  }
}

}  // namespace octo::cpu
