// Where KvAppend writes a row of one cache, for the launches that append
// (kv_append.cu, and rope.cu's RopeQKAppend).
#pragma once

#include <cstdint>

#include "kernels/kv_blocks.h"
#include "kernels/ops.h"

namespace octo::cuda {

// One cache: its row first_pos, bytes per row, units (values for F16,
// blocks otherwise) per row, and type.
struct AppendTarget {
  uint8_t* rows;
  int64_t row_bytes;
  int64_t units;
  GgmlType type;
};

inline AppendTarget TargetOf(void* cache, GgmlType type, int kv_dim, int first_pos) {
  const auto row_bytes = static_cast<int64_t>(RowBytes(type, kv_dim));
  return {static_cast<uint8_t*>(cache) + first_pos * row_bytes, row_bytes, kv_blocks::UnitsOf(type, kv_dim), type};
}

}  // namespace octo::cuda
