// Packing of token tiles (the layout is in act_tile.h).
#include "kernels/cpu/act_tile.h"

#include <cstring>

namespace octo::cpu {

bool HasActTile(ActType type) { return type != ActType::kQ8_1; }

int64_t ActTileBytes(ActType type, int64_t cols, int n) {
  switch (type) {
    case ActType::kQ8_0: return cols / kQK * TileQ8_0RecordBytes(n);
    case ActType::kQ8_K: return cols / kQKK * static_cast<int64_t>(sizeof(BlockQ8_K)) * n;
    case ActType::kF32:
    case ActType::kF16:
    case ActType::kBF16: return ActRowBytes(type, cols) * n;
    case ActType::kQ8_1: return 0;
  }
  return 0;
}

void PackActTile(ActType type, const uint8_t* rows, int64_t row_stride, int n, int64_t cols, uint8_t* out) {
  switch (type) {
    case ActType::kQ8_0: {
      const int64_t record_bytes = TileQ8_0RecordBytes(n);
      for (int64_t b = 0; b < cols / kQK; ++b) {
        uint8_t* record = out + b * record_bytes;
        float d[kMaxTileTokens] = {};
        for (int t = 0; t < n; ++t) {
          const uint8_t* row = rows + t * row_stride;
          d[t] = reinterpret_cast<const Q8_0Side*>(row + Q8_0SideOffset(cols))[b].d;
          std::memcpy(record + sizeof(d) + kQK * t, reinterpret_cast<const BlockQ8_0*>(row)[b].qs, kQK);
        }
        std::memcpy(record, d, sizeof(d));
      }
      return;
    }
    case ActType::kQ8_K: {
      auto* tile = reinterpret_cast<BlockQ8_K*>(out);
      for (int t = 0; t < n; ++t) {
        const auto* blocks = reinterpret_cast<const BlockQ8_K*>(rows + t * row_stride);
        for (int64_t b = 0; b < cols / kQKK; ++b) tile[b * n + t] = blocks[b];
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
    case ActType::kQ8_1: return;
  }
}

}  // namespace octo::cpu
