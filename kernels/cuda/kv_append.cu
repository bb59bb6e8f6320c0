// KvAppend on CUDA: new key and value rows into the cache, encoded as its
// types with kernels/kv_blocks.h, the functions the CPU twin
// (kernels/cpu/kv_append.cc) uses, so both give the same bytes for every
// finite input. Semantics and preconditions: kernels/ops.h.
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/kv_append.cuh"
#include "kernels/kv_blocks.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

// --- Kernels -----------------------------------------------------------------

// Item i = (token t, unit u) encodes unit u of row t of k into keys and of v
// into values, when the row has that many units (the two types may differ).
// Launch: one-dimensional, any size (grid-stride) over n_tokens * the larger
// units.
__global__ void KvAppendKernel(const float* k,  // (n_tokens, kv_dim)
                               const float* v,  // (n_tokens, kv_dim)
                               AppendTarget keys, AppendTarget values, int kv_dim, int64_t units, int64_t n) {
  GridStart();
  for (int64_t i = GridStrideBegin(); i < n; i += GridStrideStep()) {
    const int64_t t = i / units, u = i % units;
    if (u < keys.units) kv_blocks::EncodeUnit(keys.type, k + t * kv_dim, keys.Row(t), u);
    if (u < values.units) kv_blocks::EncodeUnit(values.type, v + t * kv_dim, values.Row(t), u);
  }
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

absl::Status KvAppend(const float* k, const float* v, int n_tokens, int kv_dim, void* k_cache, void* v_cache,
                      int first_pos, KvCacheTypes types, StreamHandle stream, const int32_t* first_pos_at) {
  if (first_pos_at != nullptr) first_pos = 0;  // read on the device
  absl::Status args = CheckKvAppendArgs(k, v, n_tokens, kv_dim, k_cache, v_cache, first_pos, types);
  if (!args.ok()) return args;
  const AppendTarget keys = TargetOf(k_cache, types.k, kv_dim, first_pos, first_pos_at);
  const AppendTarget values = TargetOf(v_cache, types.v, kv_dim, first_pos, first_pos_at);
  const int64_t units = keys.units > values.units ? keys.units : values.units;
  const int64_t n = static_cast<int64_t>(n_tokens) * units;
  OCTO_LAUNCH(KvAppendKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, k, v, keys, values, kv_dim,
              units, n);
  return absl::OkStatus();
}

}  // namespace octo::cuda
