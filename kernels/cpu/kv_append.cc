// KvAppend on the CPU: new key and value rows into an fp16 cache.
// Semantics: kernels/ops.h.
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/half.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cpu {

absl::Status KvAppend(const float* k, const float* v, int n_tokens, int kv_dim, uint16_t* k_cache,
                      uint16_t* v_cache, int first_pos) {
  absl::Status args = CheckKvAppendArgs(k, v, n_tokens, kv_dim, k_cache, v_cache, first_pos);
  if (!args.ok()) return args;
  const size_t n = static_cast<size_t>(n_tokens) * kv_dim;
  uint16_t* k_rows = k_cache + static_cast<size_t>(first_pos) * kv_dim;  // (n_tokens, kv_dim)
  uint16_t* v_rows = v_cache + static_cast<size_t>(first_pos) * kv_dim;
  for (size_t i = 0; i < n; ++i) {
    k_rows[i] = Fp32ToFp16(k[i]);
    v_rows[i] = Fp32ToFp16(v[i]);
  }
  return absl::OkStatus();
}

}  // namespace octo::cpu
