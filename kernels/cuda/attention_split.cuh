// The pieces of cuda::Attention's split blocks (kernels/cuda/attention.cu
// says what a split block does and in what order): the split arithmetic
// shared with the host, the launch's arguments, and the device code a block
// scores and sums with -- the key dots and value sums of up to
// kMaxBlockHeads query heads off one load of each key and value, the block
// reductions, the split records. Included by attention.cu alone.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/block_decode.h"
#include "kernels/cuda/act_q8.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gates.cuh"
#include "kernels/kv_blocks.h"
#include "kernels/ops.h"

namespace octo::cuda::attn {

// The largest head_dim the kernels take (ops.h): q (head_dim) sits in static
// shared memory and each thread of a split block owns kDimsPerThread
// dimensions of acc in registers. 256 covers the models Octo runs (gemma's
// 256 the largest).
constexpr int kMaxHeadDim = kMaxCudaHeadDim;
// Threads of a split block: each scores kPositionsPerThread positions.
constexpr int kSplitThreads = 128;
constexpr int kPositionsPerThread = kAttentionSplit / kSplitThreads;
constexpr int kDimsPerThread = kMaxHeadDim / kSplitThreads;
static_assert(kAttentionSplit % kSplitThreads == 0 && kMaxHeadDim % kSplitThreads == 0);
static_assert(kSplitThreads % kWarpSize == 0, "the block max and sum use full-warp shuffles");
// Loads in flight before their sums: a thread loads kKeyBatch values of a
// key, or the values of kValueBatch positions, then adds them in order (the
// same sums as one at a time; the loads no longer wait for each other).
// The value sums take 8 positions' fp16 values (16 bytes each) or 4
// positions' quantized ones at a time in a one-head block, 6 or 2 in a block
// of kMaxBlockHeads (which holds four heads' sums): the most ptxas keeps in
// registers with no spill (sm_90: 96-108 registers one head, 117-126 four;
// one head's fp16 spills at 4, oddly).
constexpr int kKeyBatch = 8;
template <GgmlType V, int H>
constexpr int kValueBatch = H == 1 ? (V == GgmlType::kF16 ? 8 : 4) : (V == GgmlType::kF16 ? 6 : 2);
// The value sum's dimensions a thread owns, consecutive: one 16-byte load of
// fp16 values a position.
constexpr int kValueDims = 8;
// The most blocks one launch may have (gridDim.x).
constexpr int64_t kMaxGridBlocks = INT32_MAX;

// Floats of a record before its acc: m, l and the done count.
constexpr int kRecordHead = 3;
// A record holds, after its acc, the split's scores (kAttentionSplit of
// them): the stats pass writes them, the value pass weights them, so a
// query's keys are loaded and dotted once.
__host__ __device__ __forceinline__ int64_t RecordFloats(int head_dim) {
  return static_cast<int64_t>(head_dim) + kRecordHead + kAttentionSplit;
}

// The query heads a split block serves, at most: heads of one kv head (a
// group of n_heads / n_kv_heads, cut into blocks of this many), every key and
// value the block loads used by each of them. A head's scores and sums are
// the one-head block's, in the same order: the bits do not depend on how
// many heads a block serves (HeadsPerBlock chooses).
constexpr int kMaxBlockHeads = 4;

// --- Split arithmetic (host and device) --------------------------------------

// Splits of a query at (logical) position pos: it sees pos + 1 positions.
// A tree query that sees none (pos -1: tree_base 0 and a zero mask) has
// one split of no positions, whose record leaves its output zeros.
__host__ __device__ __forceinline__ int64_t SplitsOf(int64_t pos) { return pos < 0 ? 1 : pos / kAttentionSplit + 1; }

// How a call's (token, split) pairs are laid out.
struct SplitLayout {
  int first_pos;     // causal: query t sits at position first_pos + t
  int fixed_splits;  // tree or non-causal: the pairs every query is given; 0 when causal
};

// Causal: sum over u < t of SplitsOf(first_pos + u) = t + F(first_pos + t)
// - F(first_pos), where F(n) = sum_{x < n} floor(x / kAttentionSplit)
// = kAttentionSplit * q * (q - 1) / 2 + q * r for n = q * kAttentionSplit + r.
__host__ __device__ __forceinline__ int64_t FloorSum(int64_t n) {
  const int64_t q = n / kAttentionSplit, r = n % kAttentionSplit;
  return kAttentionSplit * (q * (q - 1) / 2) + q * r;
}
// The pairs of tokens [0, t) of the call.
__host__ __device__ __forceinline__ int64_t PairsBefore(const SplitLayout& layout, int t) {
  if (layout.fixed_splits > 0) return static_cast<int64_t>(t) * layout.fixed_splits;
  return t + FloorSum(static_cast<int64_t>(layout.first_pos) + t) - FloorSum(layout.first_pos);
}

// --- Kernels -----------------------------------------------------------------

// What both kernels read, for one round: tokens [first_token, first_token +
// n_round_tokens) of the call, whose records start at `partials`.
struct AttentionLaunch {
  const float* q;             // (n_tokens, n_heads * head_dim)
  const uint8_t* k_cache;     // (rows the queries see, n_kv_heads * head_dim) as Types::kK
  const uint8_t* v_cache;     // as k_cache, as Types::kV
  int64_t k_row_bytes;
  int64_t v_row_bytes;
  float* out;                 // (n_tokens, n_heads * head_dim)
  float* partials;            // the round's records, (pairs, n_heads, RecordFloats(head_dim))
  SplitLayout layout;
  const uint64_t* tree_mask;  // (n_tokens) or nullptr: causal
  const int32_t* first_pos_at;  // causal: the first position, read here (AttentionParams), or null: layout's
  int tree_base;
  int all_ctx;                // non-causal: the positions every query sees; 0 when causal
  int first_token;            // the round's first token
  int n_round_tokens;
  int n_heads;
  int n_kv_heads;
  int head_dim;               // 1..kMaxHeadDim
  float scale;
  bool value_pass;            // AttentionSplitKernel: false the stats pass, true the value pass
  bool wide_keys;             // fp16 keys whose heads start 16-byte aligned: 8 values a load
  bool aligned_values;        // head_dim a multiple of kValueDims; fp16 values 16-byte aligned (LoadValues)
  ActQ8Out q8;                // q8.q non-null: out also rounded into q8 (fused.h), head by head
  const float* gate;          // (n_tokens, n_heads * head_dim) or null: out times sigmoid(gate) (fused.h)
  int heads;                  // query heads a block serves, 1..kMaxBlockHeads (HeadsPerBlock)
  int head_blocks;            // blocks a (token, split) pair takes: n_kv_heads * ceil(group / heads)
  bool prefetch;              // each thread asks L2 for its positions' key and value first (PrefetchValues)
};

// The record of head h of pair `pair` (counted from the call's token 0).
__device__ __forceinline__ float* RecordOf(const AttentionLaunch& a, int64_t pair, int h) {
  const int64_t in_round = pair - PairsBefore(a.layout, a.first_token);
  return a.partials + (in_round * a.n_heads + h) * RecordFloats(a.head_dim);
}

// The scores of a record (after its acc).
__device__ __forceinline__ float* ScoresOf(float* record, int head_dim) { return record + kRecordHead + head_dim; }

// The positions query t sees: 0..first_pos + t, every row of the call when
// non-causal, or its logical positions (ops.h) in tree mode.
__device__ __forceinline__ int ContextOf(const AttentionLaunch& a, int t) {
  if (a.tree_mask != nullptr) return a.tree_base + __popcll(a.tree_mask[t]);
  if (a.all_ctx > 0) return a.all_ctx;
  return (a.first_pos_at != nullptr ? *a.first_pos_at : a.layout.first_pos) + t + 1;
}

// The cache row of (logical) position pos of a query. Its positions below
// `contiguous` are the rows of the same index: all of a causal query's, a
// tree query's below tree_base (= contiguous). Tree position contiguous + j
// is row contiguous + tree_bits[j], tree_bits holding the mask's set bits in
// ascending order.
__device__ __forceinline__ int RowOf(int pos, int contiguous, const int* tree_bits) {
  return pos < contiguous ? pos : contiguous + tree_bits[pos - contiguous];
}

// Query t, head h: its splits' statistics (the stats pass's records) reduced
// in split order to the max M and 1 / S, S the sum of l_s * exp(m_s - M).
__device__ __forceinline__ void SplitNorm(const AttentionLaunch& a, int t, int h, float* norm) {
  const int64_t n_splits = SplitsOf(ContextOf(a, t) - 1);
  const int64_t split_stride = a.n_heads * RecordFloats(a.head_dim);
  const float* records = RecordOf(a, PairsBefore(a.layout, t), h);  // split 0's
  float max = -INFINITY;
  for (int64_t s = 0; s < n_splits; ++s) max = fmaxf(max, records[s * split_stride]);
  float sum = 0.0f;
  for (int64_t s = 0; s < n_splits; ++s) sum += records[s * split_stride + 1] * expf(records[s * split_stride] - max);
  norm[0] = max;
  norm[1] = 1.0f / sum;
}

// The max of each v[hh] over the block, returned to every thread.
// Requirements: blockDim.x == kSplitThreads, every thread calls it, once per
// block (it does not wait before reusing its shared memory).
template <int H>
__device__ __forceinline__ void SplitBlockMaxes(float (&v)[H]) {
  __shared__ float warp_maxes[H][kSplitThreads / kWarpSize];
#pragma unroll
  for (int hh = 0; hh < H; ++hh) {
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      v[hh] = fmaxf(v[hh], __shfl_xor_sync(0xffffffffu, v[hh], offset));
    }
    if (threadIdx.x % kWarpSize == 0) warp_maxes[hh][threadIdx.x / kWarpSize] = v[hh];
  }
  __syncthreads();  // every warp's maxes are written
#pragma unroll
  for (int hh = 0; hh < H; ++hh) {
    v[hh] = warp_maxes[hh][0];
    for (int w = 1; w < kSplitThreads / kWarpSize; ++w) v[hh] = fmaxf(v[hh], warp_maxes[hh][w]);
  }
}

// Output e (of token t's row, head h's values) as stored: the sum v, or
// SigmoidMul's v * sigmoid(gate) when the call gates it.
__device__ __forceinline__ float GatedOut(const AttentionLaunch& a, int t, int h, int d, float v) {
  if (a.gate == nullptr) return v;
  return v * Sigmoid(a.gate[(static_cast<int64_t>(t) * a.n_heads + h) * a.head_dim + d]);
}

// After out's head h of token t is written (by every thread of the block
// that writes it): rounded into a.q8 when the call asks, each head a span of
// RoundColumns over token t's row (a chunk of several heads is rounded by
// the block of its last; the counters are the row's own).
__device__ __forceinline__ void RoundHead(const AttentionLaunch& a, int t, int h) {
  if (a.q8.q == nullptr) return;
  const int64_t width = static_cast<int64_t>(a.n_heads) * a.head_dim, first = t * width;
  RoundColumns(a.out + first, width, 1, static_cast<int64_t>(h) * a.head_dim, a.head_dim, ActQ8From(a.q8, first));
}

// The keys' and values' cache types of one instantiation.
template <GgmlType K, GgmlType V>
struct CacheTypes {
  static constexpr GgmlType kK = K, kV = V;
};

// Asks L2 for the bytes of values [first, first + n) of a row of type T
// (whole units: values of fp16, blocks otherwise).
template <GgmlType T>
__device__ __forceinline__ void PrefetchValues(const uint8_t* row, int first, int n) {
  if constexpr (T == GgmlType::kF16) {
    PrefetchL2(row + 2 * static_cast<int64_t>(first), 2 * static_cast<int64_t>(n));
  } else {
    using D = block_decode::Decoder<T>;
    const int64_t begin = first / D::kElements, end = (first + n + D::kElements - 1) / D::kElements;
    PrefetchL2(row + begin * D::kBytes, (end - begin) * D::kBytes);
  }
}

// The 8 fp16 values at `at` (16-byte aligned), in one load, as floats.
__device__ __forceinline__ void LoadHalf8(const uint8_t* at, float* out) {
  const uint4 raw = *reinterpret_cast<const uint4*>(at);
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    out[e] = block_decode::HalfBits(static_cast<uint16_t>(words[e / 2] >> (e % 2 * 16)));  // little-endian
  }
}

// q16 . the key of head_dim values from value `first` of k_row, for each of
// the block's nh heads (head hh's q16 at q16 + hh * head_dim), each summed
// in dimension order (the CPU's portable loop: the same float), the key's
// values loaded kKeyBatch at a time -- once for all the heads -- before they
// are added, and kKeyBatches batches of loads in flight (the loop unrolled
// that far: fp16 keys 4, 16-byte loads; quantized ones 2 in a one-head
// block, which at 4 take 114-122 registers on sm_90, and 1 in a block of
// kMaxBlockHeads, whose Q8_0 keys spill at 2).
template <GgmlType K, int H>
constexpr int kKeyBatches = K == GgmlType::kF16 ? 4 : (H == 1 ? 2 : 1);
template <GgmlType K, int H>
__device__ __forceinline__ void KeyDots(const AttentionLaunch& a, const uint8_t* k_row, int first, const float* q16,
                                        int nh, float (&dot)[H]) {
  const int head_dim = a.head_dim;
#pragma unroll
  for (int hh = 0; hh < H; ++hh) dot[hh] = 0.0f;
  int d = 0;
#pragma unroll kKeyBatches<K, H>
  for (; d + kKeyBatch <= head_dim; d += kKeyBatch) {
    float k[kKeyBatch];
    if (K == GgmlType::kF16 && a.wide_keys) {
      static_assert(kKeyBatch == 8, "one 16-byte load of fp16 values");
      LoadHalf8(k_row + 2 * static_cast<int64_t>(first + d), k);
    } else {
#pragma unroll
      for (int e = 0; e < kKeyBatch; ++e) k[e] = kv_blocks::Element<K>(k_row, first + d + e);
    }
#pragma unroll
    for (int hh = 0; hh < H; ++hh) {
      if (hh < nh) {
#pragma unroll
        for (int e = 0; e < kKeyBatch; ++e) dot[hh] += q16[hh * head_dim + d + e] * k[e];
      }
    }
  }
  // The last head_dim % kKeyBatch apart: guarding them inside the batches
  // makes ptxas spill (sm_90).
  for (; d < head_dim; ++d) {
    const float k = kv_blocks::Element<K>(k_row, first + d);
#pragma unroll
    for (int hh = 0; hh < H; ++hh) {
      if (hh < nh) dot[hh] += q16[hh * head_dim + d] * k;
    }
  }
}

// kValueDims values of v_row from value `first` (those from `left` on
// zeros), as Element gives them. `aligned` (first a multiple of kValueDims,
// and for fp16 the address 16-byte aligned): fp16 in one 16-byte load, a
// quantized type's from one block, its scale read once.
template <GgmlType V>
__device__ __forceinline__ void LoadValues(const uint8_t* v_row, int first, int left, bool aligned, float* v) {
  static_assert(cpu::kQK % kValueDims == 0, "an aligned span lies in one cache block");
  if (aligned && left >= kValueDims) {
    if constexpr (V == GgmlType::kF16) {
      static_assert(kValueDims == 8, "one 16-byte load of fp16 values");
      LoadHalf8(v_row + 2 * static_cast<int64_t>(first), v);
    } else {
      using D = block_decode::Decoder<V>;
      kv_blocks::DecodeBlockSpan<V>(v_row + static_cast<int64_t>(first / D::kElements) * D::kBytes,
                                    first % D::kElements, kValueDims, v);
    }
    return;
  }
#pragma unroll
  for (int e = 0; e < kValueDims; ++e) v[e] = e < left ? kv_blocks::Element<V>(v_row, first + e) : 0.0f;
}

// acc[hh][j] (dimension threadIdx.x + j * kSplitThreads of the block's head
// hh) = sum over the split's n positions of w[i] * v[i], head hh's weights
// at w + hh * kAttentionSplit, in position groups: a group is
// ceil(head_dim / kValueDims) threads, each owning kValueDims consecutive
// dimensions, and the block holds G = kSplitThreads / that many groups.
// Group g sums positions g, g + G, g + 2G, ... in order, each value loaded
// once for the nh heads; the groups' sums are then added in group order
// (those of groups with a position). The same floats for the same n,
// whatever the call or the heads beside. A thread's loads in series are
// about n / (G * kValueBatch) rather than n / 8 (one dimension a thread,
// as before; G = 8 at head_dim 128). The split's position i is the query's
// begin + i (RowOf's row). Every thread of the block calls it, once.
template <GgmlType V, int H>
__device__ __forceinline__ void ValueSums(const AttentionLaunch& a, const float* w, int nh, int n, int first,
                                          int begin, int contiguous, const int* tree_bits,
                                          float (&acc)[H][kDimsPerThread]) {
  auto row_of = [=](int i) { return static_cast<int64_t>(RowOf(begin + i, contiguous, tree_bits)); };
  // (heads, G, head_dim): G * head_dim fits kSplitThreads * kValueDims
  __shared__ float group_sums[H][kSplitThreads * kValueDims];
  const int head_dim = a.head_dim;
  const int per_group = (head_dim + kValueDims - 1) / kValueDims;
  const int groups = kSplitThreads / per_group;
  const int g = static_cast<int>(threadIdx.x) / per_group;
  const int d0 = static_cast<int>(threadIdx.x) % per_group * kValueDims;
  const bool aligned = a.aligned_values;
  if (g < groups) {
    float sum[H][kValueDims] = {};
    int i = g;
    constexpr int kBatch = kValueBatch<V, H>;
    for (; i + (kBatch - 1) * groups < n; i += kBatch * groups) {
      float v[kBatch][kValueDims];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        LoadValues<V>(a.v_cache + row_of(i + u * groups) * a.v_row_bytes, first + d0, head_dim - d0, aligned, v[u]);
      }
#pragma unroll
      for (int hh = 0; hh < H; ++hh) {
        if (hh < nh) {
#pragma unroll
          for (int u = 0; u < kBatch; ++u) {
#pragma unroll
            for (int e = 0; e < kValueDims; ++e) sum[hh][e] += w[hh * kAttentionSplit + i + u * groups] * v[u][e];
          }
        }
      }
    }
    for (; i < n; i += groups) {  // the last positions apart, as in KeyDots
      float v[kValueDims];
      LoadValues<V>(a.v_cache + row_of(i) * a.v_row_bytes, first + d0, head_dim - d0, aligned, v);
#pragma unroll
      for (int hh = 0; hh < H; ++hh) {
        if (hh < nh) {
#pragma unroll
          for (int e = 0; e < kValueDims; ++e) sum[hh][e] += w[hh * kAttentionSplit + i] * v[e];
        }
      }
    }
#pragma unroll
    for (int hh = 0; hh < H; ++hh) {
#pragma unroll
      for (int e = 0; e < kValueDims; ++e) {
        if (hh < nh && d0 + e < head_dim) group_sums[hh][g * head_dim + d0 + e] = sum[hh][e];
      }
    }
  }
  __syncthreads();  // every group's sums are written
  const int summed = n < groups ? n : groups;
#pragma unroll
  for (int hh = 0; hh < H; ++hh) {
#pragma unroll
    for (int j = 0; j < kDimsPerThread; ++j) {
      const int d = static_cast<int>(threadIdx.x) + j * kSplitThreads;
      float total = 0.0f;
      if (hh < nh && d < head_dim && summed > 0) {
        total = group_sums[hh][d];
        for (int k = 1; k < summed; ++k) total += group_sums[hh][k * head_dim + d];
      }
      acc[hh][j] = total;
    }
  }
}

}  // namespace octo::cuda::attn
