// Where KvAppend writes a row of one cache, for the launches that append
// (kv_append.cu, and rope.cu's RopeQKAppend).
#pragma once

#include <cstdint>

#include "kernels/host_device.h"
#include "kernels/kv_blocks.h"
#include "kernels/ops.h"

namespace octo::cuda {

// One cache: where its new rows start (row first_pos, or *first_pos_at read
// on the device), bytes per row, units (values for F16, blocks otherwise)
// per row, and type.
struct AppendTarget {
  uint8_t* cache;
  int first_pos;
  const int32_t* first_pos_at;
  int64_t row_bytes;
  int64_t units;
  GgmlType type;

  OCTO_HD uint8_t* Row(int64_t t) const {
    return cache + (static_cast<int64_t>(first_pos_at != nullptr ? *first_pos_at : first_pos) + t) * row_bytes;
  }
};

inline AppendTarget TargetOf(void* cache, GgmlType type, int kv_dim, int first_pos, const int32_t* first_pos_at) {
  return {static_cast<uint8_t*>(cache), first_pos, first_pos_at, static_cast<int64_t>(RowBytes(type, kv_dim)),
          kv_blocks::UnitsOf(type, kv_dim), type};
}

}  // namespace octo::cuda
