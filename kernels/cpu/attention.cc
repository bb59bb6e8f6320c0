// Causal grouped-query attention over an fp16 KV cache, on the CPU.
// Semantics and precision: kernels/ops.h.
//
// One task per (token, head): its output depends only on its query row and
// the cache rows it sees, so the result is the same for any pool size, and a
// token gets the same output whether it is decoded alone or in a prefill
// batch. Each task scores every visible position (fp16 dot), takes the
// softmax of the scores, then sums the value rows weighted by it.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cpu/attention_kernels.h"
#include "kernels/cpu/softmax_row.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/half.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cpu {
namespace {

float PortableDot(const float* q, const uint16_t* k, int n) {
  float sum = 0.0f;
  for (int d = 0; d < n; ++d) sum += q[d] * Fp16ToFp32(k[d]);
  return sum;
}

void PortableAccumulate(float a, const uint16_t* v, float* acc, int n) {
  for (int d = 0; d < n; ++d) acc[d] += a * Fp16ToFp32(v[d]);
}

AttentionKernels PickKernels(Simd simd) {
#if defined(__x86_64__)
  if (simd == Simd::kAvx2) return Avx2AttentionKernels();
#endif
  return PortableAttentionKernels();
}

// Query t, head h: out_head (head_dim) from q_head (head_dim) and the cache
// rows 0..n_ctx-1 of kv head kv_h.
void AttendOneHead(const float* q_head, const uint16_t* k_cache, const uint16_t* v_cache,
                   float* out_head, int kv_h, int n_ctx, const AttentionParams& p,
                   const AttentionKernels& kernels) {
  const int head_dim = p.head_dim;
  const size_t kv_row_stride = static_cast<size_t>(p.n_kv_heads) * head_dim;
  const size_t kv_head_offset = static_cast<size_t>(kv_h) * head_dim;

  std::vector<float> scratch(2 * static_cast<size_t>(head_dim) + n_ctx);
  float* q16 = scratch.data();      // (head_dim) q rounded to fp16, widened back
  float* acc = q16 + head_dim;      // (head_dim) the weighted sum of values
  float* att = acc + head_dim;      // (n_ctx) scores, then weights

  // q is read in full before out is written: out may be q itself.
  for (int d = 0; d < head_dim; ++d) q16[d] = Fp16ToFp32(Fp32ToFp16(q_head[d]));

  for (int pos = 0; pos < n_ctx; ++pos) {
    const uint16_t* k = k_cache + pos * kv_row_stride + kv_head_offset;
    att[pos] = kernels.dot(q16, k, head_dim) * p.scale;
  }
  SoftmaxRow(att, n_ctx);

  for (int d = 0; d < head_dim; ++d) acc[d] = 0.0f;
  for (int pos = 0; pos < n_ctx; ++pos) {
    const uint16_t* v = v_cache + pos * kv_row_stride + kv_head_offset;
    kernels.accumulate(att[pos], v, acc, head_dim);
  }
  for (int d = 0; d < head_dim; ++d) out_head[d] = acc[d];
}

}  // namespace

AttentionKernels PortableAttentionKernels() { return {PortableDot, PortableAccumulate}; }

absl::Status Attention(const float* q, const uint16_t* k_cache, const uint16_t* v_cache,
                       float* out, const AttentionParams& p, const Exec& exec) {
  absl::Status args = CheckAttentionArgs(q, k_cache, v_cache, out, p);
  if (!args.ok()) return args;

  const AttentionKernels kernels = PickKernels(exec.simd);
  const int group = p.n_heads / p.n_kv_heads;  // query heads per kv head
  const size_t q_row_stride = static_cast<size_t>(p.n_heads) * p.head_dim;
  auto task = [&](int64_t i) {
    const int t = static_cast<int>(i / p.n_heads);
    const int h = static_cast<int>(i % p.n_heads);
    const size_t offset = t * q_row_stride + static_cast<size_t>(h) * p.head_dim;
    // Query t sits at position first_pos + t and sees rows 0..first_pos + t.
    AttendOneHead(q + offset, k_cache, v_cache, out + offset, h / group, p.first_pos + t + 1, p,
                  kernels);
  };

  const int64_t n_tasks = static_cast<int64_t>(p.n_tokens) * p.n_heads;
  if (exec.pool != nullptr) {
    exec.pool->ParallelFor(n_tasks, task);
  } else {
    for (int64_t i = 0; i < n_tasks; ++i) task(i);
  }
  return absl::OkStatus();
}

}  // namespace octo::cpu
