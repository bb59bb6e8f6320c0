// KvAppend on the CPU: new key and value rows into the cache, encoded as its
// types (kernels/kv_blocks.h). Semantics: kernels/ops.h.
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/half.h"
#include "kernels/kv_blocks.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cpu {
namespace {

// Rows [first_pos, first_pos + n_tokens) of one cache from x (n_tokens, kv_dim).
void AppendRows(const float* x, int n_tokens, int kv_dim, GgmlType type, void* cache, int first_pos) {
  const size_t row_bytes = RowBytes(type, kv_dim);
  auto* rows = static_cast<uint8_t*>(cache) + static_cast<size_t>(first_pos) * row_bytes;
  if (type == GgmlType::kF16) {
    auto* halves = reinterpret_cast<uint16_t*>(rows);
    for (size_t i = 0; i < static_cast<size_t>(n_tokens) * kv_dim; ++i) halves[i] = Fp32ToFp16(x[i]);
    return;
  }
  const int64_t units = kv_blocks::UnitsOf(type, kv_dim);
  for (int t = 0; t < n_tokens; ++t) {
    for (int64_t i = 0; i < units; ++i) {
      kv_blocks::EncodeUnit(type, x + static_cast<size_t>(t) * kv_dim, rows + t * row_bytes, i);
    }
  }
}

}  // namespace

absl::Status KvAppend(const float* k, const float* v, int n_tokens, int kv_dim, void* k_cache, void* v_cache,
                      int first_pos, KvCacheTypes types, const int32_t* first_pos_at) {
  if (first_pos_at != nullptr) first_pos = *first_pos_at;  // the step's position, now
  absl::Status args = CheckKvAppendArgs(k, v, n_tokens, kv_dim, k_cache, v_cache, first_pos, types);
  if (!args.ok()) return args;
  AppendRows(k, n_tokens, kv_dim, types.k, k_cache, first_pos);
  AppendRows(v, n_tokens, kv_dim, types.v, v_cache, first_pos);
  return absl::OkStatus();
}

}  // namespace octo::cpu
