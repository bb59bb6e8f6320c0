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

void PortableScores(const float* q, const uint16_t* k, size_t row_stride, int n_ctx,
                    int head_dim, float scale, float* att) {
  for (int pos = 0; pos < n_ctx; ++pos) {
    const uint16_t* k_row = k + pos * row_stride;
    float dot = 0.0f;
    for (int d = 0; d < head_dim; ++d) dot += q[d] * Fp16ToFp32(k_row[d]);
    att[pos] = dot * scale;
  }
}

void PortableWeightedSum(const float* att, const uint16_t* v, size_t row_stride, int n_ctx,
                         int head_dim, float* out) {
  for (int d = 0; d < head_dim; ++d) out[d] = 0.0f;
  for (int pos = 0; pos < n_ctx; ++pos) {
    const uint16_t* v_row = v + pos * row_stride;
    for (int d = 0; d < head_dim; ++d) out[d] += att[pos] * Fp16ToFp32(v_row[d]);
  }
}

AttentionKernels PickKernels(Simd simd) {
#if defined(__x86_64__)
  if (simd == Simd::kAvx2) return Avx2AttentionKernels();
#endif
  return PortableAttentionKernels();
}

// One query head: out_head (head_dim) from q_head (head_dim) and cache rows
// 0..n_ctx-1 of kv head kv_h.
void AttendOneHead(const float* q_head, const uint16_t* k_cache, const uint16_t* v_cache,
                   float* out_head, int kv_h, int n_ctx, const AttentionParams& p,
                   const AttentionKernels& kernels) {
  const int head_dim = p.head_dim;
  const size_t row_stride = static_cast<size_t>(p.n_kv_heads) * head_dim;
  const size_t kv_offset = static_cast<size_t>(kv_h) * head_dim;

  std::vector<float> scratch(static_cast<size_t>(head_dim) + n_ctx);
  float* q16 = scratch.data();  // (head_dim) q rounded to fp16, widened back
  float* att = q16 + head_dim;  // (n_ctx) scores, then weights

  // q is read in full before out is written: out may be q itself.
  for (int d = 0; d < head_dim; ++d) q16[d] = Fp16ToFp32(Fp32ToFp16(q_head[d]));
  kernels.scores(q16, k_cache + kv_offset, row_stride, n_ctx, head_dim, p.scale, att);
  SoftmaxRow(att, n_ctx);
  // The weights go to fp16 before the product with V, as llama.cpp's
  // attention without flash attention rounds them (ops.h).
  for (int pos = 0; pos < n_ctx; ++pos) att[pos] = Fp16ToFp32(Fp32ToFp16(att[pos]));
  kernels.weighted_sum(att, v_cache + kv_offset, row_stride, n_ctx, head_dim, out_head);
}

}  // namespace

AttentionKernels PortableAttentionKernels() { return {PortableScores, PortableWeightedSum}; }

absl::Status Attention(const float* q, const uint16_t* k_cache, const uint16_t* v_cache,
                       float* out, const AttentionParams& p, const Exec& exec) {
  absl::Status args = CheckAttentionArgs(q, k_cache, v_cache, out, p);
  if (!args.ok()) return args;

  const AttentionKernels kernels = PickKernels(exec.simd);
  const int group = p.n_heads / p.n_kv_heads;  // query heads per kv head
  const size_t q_row_stride = static_cast<size_t>(p.n_heads) * p.head_dim;
  auto task = [&](int64_t i) {
    // Last token first: in a prefill the later tokens see more rows, and
    // handing out the long tasks first keeps the threads evenly busy.
    const int t = p.n_tokens - 1 - static_cast<int>(i / p.n_heads);
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
