// Causal, tree or non-causal grouped-query attention over a KV cache (fp16
// or quantized, kernels/kv_blocks.h), on the CPU.
// Semantics and precision: kernels/ops.h.
//
// One task per (token, head), or over a quantized cache per (token, kv head)
// with its group of query heads, which share the decoded rows: a head's
// output depends only on its query row and the cache rows it sees, whatever
// task computes it, so the result is the same for any pool size, and a
// token gets the same output whether it is decoded alone or in a prefill
// batch. Each task scores every visible position (fp16 dot), takes the
// softmax of the scores, then sums the value rows weighted by it. A
// quantized cache's rows are decoded to float, kDecodeRows at a time, and go
// through the same loops' float twins.
//
// The rows a query sees are runs of consecutive cache rows: one run for a
// causal or non-causal query, [0, tree_base) and then the stretches of its mask for a tree
// query. Scoring and summing run by run gives the bits of one pass over the
// same rows stored contiguously (attention_kernels.h), which is the tree
// contract of ops.h.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/attention_kernels.h"
#include "kernels/cpu/softmax_row.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/half.h"
#include "kernels/kv_blocks.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cpu {
namespace {

inline float Widen(uint16_t h) { return Fp16ToFp32(h); }
inline float Widen(float x) { return x; }

template <typename Row>
void PortableScores(const float* q, const Row* k, size_t row_stride, int n_ctx, int head_dim, float scale,
                    float* att) {
  for (int pos = 0; pos < n_ctx; ++pos) {
    const Row* k_row = k + pos * row_stride;
    float dot = 0.0f;
    for (int d = 0; d < head_dim; ++d) dot += q[d] * Widen(k_row[d]);
    att[pos] = dot * scale;
  }
}

template <typename Row>
void PortableWeightedSum(const float* att, const Row* v, size_t row_stride, int n_ctx, int head_dim, float* out) {
  for (int pos = 0; pos < n_ctx; ++pos) {
    const Row* v_row = v + pos * row_stride;
    for (int d = 0; d < head_dim; ++d) out[d] += att[pos] * Widen(v_row[d]);
  }
}

AttentionKernels PickKernels(Simd simd) {
#if defined(__x86_64__)
  if (simd == Simd::kAvx2) return Avx2AttentionKernels();
#endif
  return PortableAttentionKernels();
}

// The cache rows one query sees, in ascending order (its logical positions,
// ops.h), as runs of consecutive rows.
struct VisibleRows {
  struct Run {
    int first_row;
    int n_rows;
  };
  // [0, tree_base), then at most one run per two mask bits (a run ends at a
  // clear bit).
  static constexpr int kMaxRuns = 1 + kMaxTreeAttentionRows / 2;
  Run runs[kMaxRuns];
  int n_runs = 0;
  int n_ctx = 0;  // rows in all

  // Rows [first_row, first_row + n), after every row added so far.
  void Add(int first_row, int n) {
    if (n == 0) return;
    if (n_runs > 0 && runs[n_runs - 1].first_row + runs[n_runs - 1].n_rows == first_row) {
      runs[n_runs - 1].n_rows += n;
    } else {
      runs[n_runs++] = {first_row, n};
    }
    n_ctx += n;
  }
};

VisibleRows VisibleRowsOf(const AttentionParams& p, int t) {
  VisibleRows rows;
  if (p.tree_mask == nullptr) {
    // Query t sits at position first_pos + t and sees rows 0..first_pos + t;
    // non-causal, every row of the call, as the query at its last position.
    rows.Add(0, p.causal ? p.first_pos + t + 1 : p.first_pos + p.n_tokens);
    return rows;
  }
  rows.Add(0, p.tree_base);
  for (int j = 0; j < kMaxTreeAttentionRows; ++j) {
    if ((p.tree_mask[t] >> j & 1) != 0) rows.Add(p.tree_base + j, 1);
  }
  return rows;
}

// One kind (keys or values) of the cache, as one kv head reads it.
struct HeadRows {
  const uint8_t* data;  // cache row 0
  size_t row_bytes;
  GgmlType type;
  int first;            // the head's first value within a row: kv_h * head_dim
};

// Rows a quantized run is decoded in, to float, before the float kernels.
constexpr int kDecodeRows = 64;

// out (n_rows, head_dim): the head's values of rows first_row.. decoded.
void DecodeRows(const HeadRows& rows, int first_row, int n_rows, int head_dim, const AttentionKernels& kernels,
                float* out) {
  const uint8_t* first = rows.data + static_cast<size_t>(first_row) * rows.row_bytes;
  kernels.decode_rows(rows.type, first, rows.row_bytes, n_rows, rows.first, head_dim, out);
}

// The fp16 bits of the head's part of row `row` (an F16 cache).
const uint16_t* Fp16At(const HeadRows& rows, int row) {
  return reinterpret_cast<const uint16_t*>(rows.data + static_cast<size_t>(row) * rows.row_bytes) + rows.first;
}

// Calls body(row_data, row_stride, first, n) over `run`: an F16 cache's rows
// as they lie, a quantized one's decoded kDecodeRows at a time into
// `decoded`; `first` counts from the run's start.
template <typename Fp16Body, typename FloatBody>
void ForRunRows(const HeadRows& rows, const VisibleRows::Run& run, int head_dim, const AttentionKernels& kernels,
                float* decoded, Fp16Body fp16_body, FloatBody float_body) {
  if (rows.type == GgmlType::kF16) {
    fp16_body(Fp16At(rows, run.first_row), rows.row_bytes / sizeof(uint16_t), 0, run.n_rows);
    return;
  }
  for (int i = 0; i < run.n_rows; i += kDecodeRows) {
    const int n = std::min(kDecodeRows, run.n_rows - i);
    DecodeRows(rows, run.first_row + i, n, head_dim, kernels, decoded);
    float_body(decoded, static_cast<size_t>(head_dim), i, n);
  }
}

// `heads` query heads of one kv head (consecutive, so their q and out rows
// are too): out_heads (heads, head_dim) from q_heads (heads, head_dim) and
// the cache rows `rows`. Each head is computed on its own, exactly as alone;
// together they share each decoded chunk of a quantized cache.
void AttendHeads(const float* q_heads, int heads, const HeadRows& keys, const HeadRows& values, float* out_heads,
                 const VisibleRows& rows, const AttentionParams& p, const AttentionKernels& kernels) {
  const int head_dim = p.head_dim;
  const int n_ctx = rows.n_ctx;
  const bool quantized = keys.type != GgmlType::kF16 || values.type != GgmlType::kF16;
  const size_t q_floats = static_cast<size_t>(heads) * head_dim, att_floats = static_cast<size_t>(heads) * n_ctx;
  std::vector<float> scratch(q_floats + att_floats + (quantized ? static_cast<size_t>(kDecodeRows) * head_dim : 0));
  float* q16 = scratch.data();      // (heads, head_dim) q rounded to fp16, widened back
  float* att = q16 + q_floats;      // (heads, n_ctx) scores, then weights, by logical position
  float* decoded = att + att_floats;  // (kDecodeRows, head_dim) a quantized cache's rows

  // q is read in full before out is written: out may be q itself.
  for (size_t i = 0; i < q_floats; ++i) q16[i] = Fp16ToFp32(Fp32ToFp16(q_heads[i]));
  int pos = 0;
  for (int r = 0; r < rows.n_runs; ++r) {
    const VisibleRows::Run& run = rows.runs[r];
    ForRunRows(
        keys, run, head_dim, kernels, decoded,
        [&](const uint16_t* k, size_t stride, int first, int n) {
          for (int h = 0; h < heads; ++h) {
            kernels.scores(q16 + h * head_dim, k, stride, n, head_dim, p.scale, att + h * n_ctx + pos + first);
          }
        },
        [&](const float* k, size_t stride, int first, int n) {
          for (int h = 0; h < heads; ++h) {
            kernels.scores_f32(q16 + h * head_dim, k, stride, n, head_dim, p.scale, att + h * n_ctx + pos + first);
          }
        });
    pos += run.n_rows;
  }
  for (int h = 0; h < heads; ++h) {
    float* a = att + h * n_ctx;
    SoftmaxRow(a, n_ctx);
    // Over an fp16 V the weights go to fp16 before the product, as
    // llama.cpp's attention without flash attention rounds them (ops.h).
    if (values.type == GgmlType::kF16) {
      for (int i = 0; i < n_ctx; ++i) a[i] = Fp16ToFp32(Fp32ToFp16(a[i]));
    }
  }
  // One sum per head over every run: each call continues its accumulators.
  for (size_t i = 0; i < q_floats; ++i) out_heads[i] = 0.0f;
  pos = 0;
  for (int r = 0; r < rows.n_runs; ++r) {
    const VisibleRows::Run& run = rows.runs[r];
    ForRunRows(
        values, run, head_dim, kernels, decoded,
        [&](const uint16_t* v, size_t stride, int first, int n) {
          for (int h = 0; h < heads; ++h) {
            kernels.weighted_sum(att + h * n_ctx + pos + first, v, stride, n, head_dim, out_heads + h * head_dim);
          }
        },
        [&](const float* v, size_t stride, int first, int n) {
          for (int h = 0; h < heads; ++h) {
            kernels.weighted_sum_f32(att + h * n_ctx + pos + first, v, stride, n, head_dim, out_heads + h * head_dim);
          }
        });
    pos += run.n_rows;
  }
}

}  // namespace

AttentionKernels PortableAttentionKernels() {
  return {PortableScores<uint16_t>, PortableWeightedSum<uint16_t>, PortableScores<float>, PortableWeightedSum<float>,
          DecodeKvRows};
}

absl::Status Attention(const float* q, const void* k_cache, const void* v_cache, float* out,
                       const AttentionParams& params, const Exec& exec) {
  absl::Status args = CheckAttentionArgs(q, k_cache, v_cache, out, params);
  if (!args.ok()) return args;
  AttentionParams p = params;
  if (p.first_pos_at != nullptr) {  // the step's position, now
    p.first_pos = *p.first_pos_at;
    if (p.first_pos < 0 || int64_t{p.first_pos} + p.n_tokens > p.max_ctx) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "Attention: *first_pos_at (%d) + n_tokens (%d) is past max_ctx (%d)", p.first_pos, p.n_tokens, p.max_ctx));
    }
  }
  // The CPU can read the masks, so it refuses a query that sees no row of
  // the tree (its own row at least belongs in its mask).
  if (p.tree_mask != nullptr) {
    for (int t = 0; t < p.n_tokens; ++t) {
      if (p.tree_mask[t] == 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("Attention: tree_mask[%d] is 0; every tree query sees its own row", t));
      }
    }
  }

  const AttentionKernels kernels = PickKernels(exec.simd);
  const int group = p.n_heads / p.n_kv_heads;  // query heads per kv head
  // A task is `heads` query heads of one kv head of one token: one head over
  // an fp16 cache (nothing to share), over a quantized one the whole group,
  // which then decodes each row once, unless that leaves too few tasks for
  // the pool.
  const int threads = exec.pool != nullptr ? exec.pool->size() : 1;
  const bool quantized = p.types.k != GgmlType::kF16 || p.types.v != GgmlType::kF16;
  const bool grouped = quantized && int64_t{p.n_tokens} * p.n_kv_heads >= 2 * threads;
  const int heads = grouped ? group : 1;
  const int tasks_per_token = p.n_heads / heads;
  const size_t q_row_stride = static_cast<size_t>(p.n_heads) * p.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(p.n_kv_heads) * p.head_dim;
  const size_t k_row_bytes = RowBytes(p.types.k, kv_dim), v_row_bytes = RowBytes(p.types.v, kv_dim);
  auto task = [&](int64_t i) {
    // Last token first: in a prefill the later tokens see more rows, and
    // handing out the long tasks first keeps the threads evenly busy.
    const int t = p.n_tokens - 1 - static_cast<int>(i / tasks_per_token);
    const int h = static_cast<int>(i % tasks_per_token) * heads;  // the task's first query head
    const size_t offset = t * q_row_stride + static_cast<size_t>(h) * p.head_dim;
    const int first = h / group * p.head_dim;  // its kv head's first value in a row
    const HeadRows keys{static_cast<const uint8_t*>(k_cache), k_row_bytes, p.types.k, first};
    const HeadRows values{static_cast<const uint8_t*>(v_cache), v_row_bytes, p.types.v, first};
    AttendHeads(q + offset, heads, keys, values, out + offset, VisibleRowsOf(p, t), p, kernels);
  };

  const int64_t n_tasks = static_cast<int64_t>(p.n_tokens) * tasks_per_token;
  if (exec.pool != nullptr) {
    exec.pool->ParallelFor(n_tasks, task);
  } else {
    for (int64_t i = 0; i < n_tasks; ++i) task(i);
  }
  return absl::OkStatus();
}

}  // namespace octo::cpu
