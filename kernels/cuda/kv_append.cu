// KvAppend on CUDA: new key and value rows into an fp16 cache, the same bits
// as the CPU twin (kernels/cpu/kv_append.cc) for every non-NaN input.
// Semantics and preconditions: kernels/ops.h.
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

// --- Kernels -----------------------------------------------------------------

// k_rows[i] = fp16(k[i]), v_rows[i] = fp16(v[i]), rounded to nearest, ties to
// even (kernels/half.h's Fp32ToFp16 rounds the same way), stored as bits.
// k_rows and v_rows are the caches' rows first_pos.. (the launcher offsets
// them).
// Launch: one-dimensional, any size (grid-stride).
__global__ void KvAppendKernel(const float* k,     // (n_tokens, kv_dim)
                               const float* v,     // (n_tokens, kv_dim)
                               uint16_t* k_rows,   // (n_tokens, kv_dim) fp16 bits
                               uint16_t* v_rows,   // (n_tokens, kv_dim) fp16 bits
                               int64_t n) {
  for (int64_t i = GridStrideBegin(); i < n; i += GridStrideStep()) {
    k_rows[i] = __half_as_ushort(FromFloat<__half>(k[i]));
    v_rows[i] = __half_as_ushort(FromFloat<__half>(v[i]));
  }
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

absl::Status KvAppend(const float* k, const float* v, int n_tokens, int kv_dim, uint16_t* k_cache,
                      uint16_t* v_cache, int first_pos, StreamHandle stream) {
  absl::Status args = CheckKvAppendArgs(k, v, n_tokens, kv_dim, k_cache, v_cache, first_pos);
  if (!args.ok()) return args;
  const int64_t n = static_cast<int64_t>(n_tokens) * kv_dim;
  const size_t first = static_cast<size_t>(first_pos) * kv_dim;
  OCTO_LAUNCH(KvAppendKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, k, v, k_cache + first,
              v_cache + first, n);
  return absl::OkStatus();
}

}  // namespace octo::cuda
