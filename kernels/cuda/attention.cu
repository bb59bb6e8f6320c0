// Causal, tree or non-causal grouped-query attention on CUDA, flash-decoding,
// over an fp16 or quantized KV cache (one instantiation of the split kernel
// per pair of cache types).
// Semantics, precision and preconditions: kernels/ops.h; the CPU twin is
// kernels/cpu/attention.cc.
//
// The positions 0..pos a query at position pos sees are cut into splits of
// kAttentionSplit: split s holds positions [s * kAttentionSplit,
// min((s + 1) * kAttentionSplit, pos + 1)), so a query has pos /
// kAttentionSplit + 1 splits, fixed by its position alone. A tree query's
// positions are its logical ones (ops.h): it is cut, scored and summed
// exactly as the causal query at its logical position, only each logical
// position's key and value are read from the cache row its mask maps it to.
// So it gets that causal query's bits. A non-causal query is cut as the
// causal query at the call's last position, first_pos + n_tokens - 1, and
// gets its bits likewise. One or two launches per round:
//
//  1. AttentionSplitKernel, stats pass, one block per (token, split) and
//     heads: up to kMaxBlockHeads query heads of one kv head, which share
//     each key and value the block loads (decode steps: one head a block).
//     A query of one split (every query of a context up to kAttentionSplit:
//     most decode steps) is done here whole: the block scores its positions,
//     takes their max m and sum l of exp(score - m), weights each position
//     by exp(score - m) / l and writes the weighted sum of its value rows to
//     out. A query of more splits: the block writes its split's m, l and
//     scores to the split's record.
//  2. AttentionSplitKernel, value pass, the blocks of queries of more than
//     one split (launched only when the round has such a query): thread 0
//     reduces the query's records (m, l) in split order to its max M and
//     sum S (SplitNorm: every block of a query computes the same floats),
//     then the block weights each of the scores its split's record holds
//     (so a query's keys are loaded and dotted once) by exp(score - M) / S
//     and writes the weighted sum acc (head_dim) of its value rows to the
//     record. The last block of the query to finish (a counter per (token,
//     heads), zeroed by the stats pass) sums the query's acc over its splits,
//     in split order, into out.
// A one-split query's weights are the value pass's for M = m, S = l (the
// same expressions), so a query's bits do not depend on which pass did it.
//
// Scratch: the records of every (token, split, head) of a round, packed by
// token, then split, then head ("pairs" are the (token, split) pairs, counted
// from token 0 of the call):
//   record r = pair * n_heads + head, RecordFloats(head_dim) floats: m, l,
//   the count of value blocks done (an int, used in the query's split 0
//   only), acc (head_dim), the split's scores (kAttentionSplit).
// A causal query's splits follow from its position, so the pairs are packed
// tight (PairsBefore is a closed form). Non-causal queries all have the
// last position's splits. A tree query's follow from its mask,
// which lies in device memory where the host cannot read it: every tree
// query is given the pairs of the most positions it can see, tree_base +
// kMaxTreeAttentionRows, in the scratch and in the grid, and the split
// blocks past its real splits return at once.
// A scratch smaller than AttentionScratchBytes runs the tokens in rounds of
// as many whole tokens as it holds; every block computes the same thing in
// any round, so the bits do not change.
//
// out may be q: q[t] head h is read only by the stats pass's split blocks
// serving (t, h), and out[t] head h is written by the value pass (the stats
// pass's one block, for a one-split query, after it has read it).
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/act_q8.cuh"
#include "kernels/cuda/attention_split.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/fused.h"
#include "kernels/kv_blocks.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

using namespace attn;

// One block per (pair, heads) of the round: blockIdx.x = pair * head_blocks
// + b, pair counted from the round's first; b = kv * chunks + c serves the
// heads [c * heads, min((c + 1) * heads, group)) of kv head kv's group.
// Thread i scores positions i and i + kSplitThreads of the split for each of
// the block's heads, each dot in dimension order (as the CPU's portable loop:
// the same float scores); then the block sums the weighted values in
// position groups (ValueSums), thread i holding dimensions i and i +
// kSplitThreads of each head's result. Keys and values are read with
// kv_blocks::Element, the CPU's decoder, once for all the block's heads.
// Launch: blockDim.x == kSplitThreads.
template <typename Types, int H>
__global__ void __launch_bounds__(kSplitThreads) AttentionSplitKernel(AttentionLaunch a) {
  GridStart();
  __shared__ float q16[H * kMaxHeadDim];  // (heads, head_dim) q rounded to fp16, widened back
  __shared__ float p[H * kAttentionSplit];  // (heads, split) the scores, then exp(score - m)
  __shared__ int tree_bits[kMaxTreeAttentionRows];  // tree mode: the mask's set bits, ascending

  // Which heads: nh of them from h0, all of kv head kv.
  const int group = a.n_heads / a.n_kv_heads;
  const int chunks = (group + a.heads - 1) / a.heads;
  const int b = static_cast<int>(blockIdx.x % a.head_blocks);
  const int kv = b / chunks;
  const int in_group = b % chunks * a.heads;
  const int h0 = kv * group + in_group;
  const int nh = H == 1 ? 1 : (group - in_group < a.heads ? group - in_group : a.heads);
  // Which token and split: the token is the last one whose first pair is at
  // or before this block's (a binary search over the round's tokens).
  const int64_t pair = PairsBefore(a.layout, a.first_token) + blockIdx.x / a.head_blocks;
  int t = a.first_token, t_end = a.first_token + a.n_round_tokens;
  while (t_end - t > 1) {
    const int mid = t + (t_end - t) / 2;
    if (PairsBefore(a.layout, mid) <= pair) {
      t = mid;
    } else {
      t_end = mid;
    }
  }
  const int split = static_cast<int>(pair - PairsBefore(a.layout, t));
  const int n_ctx = ContextOf(a, t);
  // A tree query's pairs are those of the most positions it could see; the
  // whole block leaves before any barrier when its split is not one of the
  // query's (never for a causal or non-causal query, whose pairs are exact).
  const int n_splits = static_cast<int>(SplitsOf(n_ctx - 1));
  if (split >= n_splits) return;
  // The value pass serves the queries of more than one split; the stats
  // pass did the others whole.
  if (a.value_pass && n_splits == 1) return;
  const int begin = split * kAttentionSplit;
  const int n_left = n_ctx - begin;
  const int n = n_left < kAttentionSplit ? n_left : kAttentionSplit;  // positions in this split

  int contiguous = n_ctx;  // positions that are rows of the same index
  if (a.tree_mask != nullptr) {
    contiguous = a.tree_base;
    // Thread b < 64 places bit b of the mask, if set, at its rank.
    static_assert(kSplitThreads >= kMaxTreeAttentionRows, "one thread per mask bit");
    const uint64_t mask = a.tree_mask[t];
    const int bit = static_cast<int>(threadIdx.x);
    if (bit < kMaxTreeAttentionRows && (mask >> bit & 1) != 0) {
      tree_bits[__popcll(mask & ((uint64_t{1} << bit) - 1))] = bit;
    }
  }
  const int head_dim = a.head_dim;
  if (!a.value_pass) {
    const float* q_heads = a.q + (static_cast<size_t>(t) * a.n_heads + h0) * head_dim;  // the block's heads, in a row
    for (int e = threadIdx.x; e < nh * head_dim; e += kSplitThreads) q16[e] = ToFloat(FromFloat<__half>(q_heads[e]));
  }
  __syncthreads();  // q16 and tree_bits are written

  const int first = kv * head_dim;  // the kv head's first value in a row
  // Position begin + i of the query lies in this cache row.
  auto row_of = [&](int i) { return static_cast<int64_t>(RowOf(begin + i, contiguous, tree_bits)); };
  // A few tokens' blocks (a decode step) wait on their loads' round trips:
  // the key dots below load a row kKeyBatches loads at a time, the value
  // sums after them a position group at a time. Asked for all at once here,
  // the rows of the split are in L2 by the time those loads come (the value
  // pass loads no keys).
  if (a.prefetch) {
#pragma unroll
    for (int j = 0; j < kPositionsPerThread; ++j) {
      const int i = threadIdx.x + j * kSplitThreads;
      if (i < n) {
        if (!a.value_pass) PrefetchValues<Types::kK>(a.k_cache + row_of(i) * a.k_row_bytes, first, head_dim);
        PrefetchValues<Types::kV>(a.v_cache + row_of(i) * a.v_row_bytes, first, head_dim);
      }
    }
  }
  // The done count of the query's value blocks: in the split 0 record of
  // the block's first head.
  auto done = [&] { return reinterpret_cast<int*>(RecordOf(a, pair - split, h0) + 2); };
  __shared__ float norm[H][2];  // each head's max and 1 / sum

  if (!a.value_pass) {
    // Scores and their maxes: thread i's own p[i] (no barrier until the
    // block's max).
    float m[H];
#pragma unroll
    for (int hh = 0; hh < H; ++hh) m[hh] = -INFINITY;
#pragma unroll
    for (int j = 0; j < kPositionsPerThread; ++j) {
      const int i = threadIdx.x + j * kSplitThreads;
      if (i < n) {
        float dot[H];
        KeyDots<Types::kK, H>(a, a.k_cache + row_of(i) * a.k_row_bytes, first, q16, nh, dot);
#pragma unroll
        for (int hh = 0; hh < H; ++hh) {
          if (hh < nh) {
            p[hh * kAttentionSplit + i] = dot[hh] * a.scale;
            m[hh] = fmaxf(m[hh], p[hh * kAttentionSplit + i]);
          }
        }
      }
    }
    // Stats: the split's max, and the sum of exp(score - m), head by head.
    SplitBlockMaxes(m);
    float l[H];
#pragma unroll
    for (int hh = 0; hh < H; ++hh) {
      l[hh] = 0.0f;
      if (hh >= nh) continue;
#pragma unroll
      for (int j = 0; j < kPositionsPerThread; ++j) {
        const int i = threadIdx.x + j * kSplitThreads;
        if (i < n) l[hh] += expf(p[hh * kAttentionSplit + i] - m[hh]);
      }
      l[hh] = BlockReduceSum(l[hh]);
    }
    if (n_splits > 1) {
      // The record: the scores for the value pass (each thread its own),
      // and, by thread hh, head hh's statistics (m and l indexed by a
      // constant: by threadIdx.x they would go to local memory).
#pragma unroll
      for (int hh = 0; hh < H; ++hh) {
        if (hh >= nh) continue;
        float* record = RecordOf(a, pair, h0 + hh);
        float* scores = ScoresOf(record, head_dim);
#pragma unroll
        for (int j = 0; j < kPositionsPerThread; ++j) {
          const int i = threadIdx.x + j * kSplitThreads;
          if (i < n) scores[i] = p[hh * kAttentionSplit + i];
        }
        if (static_cast<int>(threadIdx.x) == hh) {
          record[0] = m[hh];
          record[1] = l[hh];
        }
      }
      if (threadIdx.x == 0 && split == 0) *done() = 0;
      return;
    }
    // The query's one split: SplitNorm's floats over this one record.
#pragma unroll
    for (int hh = 0; hh < H; ++hh) {
      if (hh < nh && static_cast<int>(threadIdx.x) == hh) {
        const float max = fmaxf(-INFINITY, m[hh]);
        norm[hh][0] = max;
        norm[hh][1] = 1.0f / (0.0f + l[hh] * expf(m[hh] - max));
      }
    }
  } else {
    // The stats pass's scores of the split, and (thread hh) head hh's split
    // statistics reduced to (M, 1 / S).
    for (int hh = 0; hh < nh; ++hh) {
      const float* scores = ScoresOf(RecordOf(a, pair, h0 + hh), head_dim);
#pragma unroll
      for (int j = 0; j < kPositionsPerThread; ++j) {
        const int i = threadIdx.x + j * kSplitThreads;
        if (i < n) p[hh * kAttentionSplit + i] = scores[i];
      }
    }
    if (static_cast<int>(threadIdx.x) < nh) SplitNorm(a, t, h0 + threadIdx.x, norm[threadIdx.x]);
  }
  __syncthreads();  // norm is written

  // Values: the normalized weights (rounded to fp16 over an fp16 V, as on the
  // CPU), then acc = sum_i p[i] * v[i] in position groups (ValueSums).
#pragma unroll
  for (int hh = 0; hh < H; ++hh) {
    if (hh >= nh) continue;
    const float max = norm[hh][0], inv_sum = norm[hh][1];
#pragma unroll
    for (int j = 0; j < kPositionsPerThread; ++j) {
      const int i = threadIdx.x + j * kSplitThreads;
      if (i < n) {
        const float w = expf(p[hh * kAttentionSplit + i] - max) * inv_sum;
        p[hh * kAttentionSplit + i] = Types::kV == GgmlType::kF16 ? ToFloat(FromFloat<__half>(w)) : w;
      }
    }
  }
  __syncthreads();  // every p[i] is written
  float acc[H][kDimsPerThread];
  ValueSums<Types::kV, H>(a, p, nh, n, first, begin, contiguous, tree_bits, acc);
  auto out_head = [&](int hh) { return a.out + (static_cast<size_t>(t) * a.n_heads + h0 + hh) * head_dim; };
  if (n_splits == 1) {
#pragma unroll
    for (int hh = 0; hh < H; ++hh) {
      if (hh >= nh) continue;
#pragma unroll
      for (int j = 0; j < kDimsPerThread; ++j) {
        const int d = threadIdx.x + j * kSplitThreads;
        // the sum over one split, as below
        if (d < head_dim) out_head(hh)[d] = GatedOut(a, t, h0 + hh, d, 0.0f + acc[hh][j]);
      }
    }
    for (int hh = 0; hh < nh; ++hh) RoundHead(a, t, h0 + hh);
    return;
  }
#pragma unroll
  for (int hh = 0; hh < H; ++hh) {
    if (hh >= nh) continue;
    float* record = RecordOf(a, pair, h0 + hh);
#pragma unroll
    for (int j = 0; j < kDimsPerThread; ++j) {
      const int d = threadIdx.x + j * kSplitThreads;
      if (d < head_dim) record[kRecordHead + d] = acc[hh][j];
    }
  }
  // The query's last block to get here sums every split's acc, in split
  // order (the weights are already normalized).
  __threadfence();  // this block's acc is visible to the device before it counts
  __shared__ bool last;
  __syncthreads();  // every thread's acc is written and fenced
  if (threadIdx.x == 0) last = atomicAdd(done(), 1) == n_splits - 1;
  __syncthreads();  // last is written
  if (!last) return;
  __threadfence();
  const int64_t split_stride = a.n_heads * RecordFloats(head_dim);  // between a token's splits
  for (int hh = 0; hh < nh; ++hh) {
    const volatile float* records = RecordOf(a, pair - split, h0 + hh);
    for (int d = threadIdx.x; d < head_dim; d += kSplitThreads) {
      float sum = 0.0f;
      for (int64_t s = 0; s < n_splits; ++s) sum += records[s * split_stride + kRecordHead + d];
      out_head(hh)[d] = GatedOut(a, t, h0 + hh, d, sum);
    }
  }
  for (int hh = 0; hh < nh; ++hh) RoundHead(a, t, h0 + hh);
}

// --- Host helpers -------------------------------------------------------------

// a * b, or SIZE_MAX if it does not fit.
size_t SaturatingMul(size_t a, size_t b) { return a != 0 && b > SIZE_MAX / a ? SIZE_MAX : a * b; }

// Tree mode: each query is given the splits of the most positions it can
// see, tree_base + kMaxTreeAttentionRows (the host cannot read its mask).
// Non-causal: those of the last position, first_pos + n_tokens - 1.
SplitLayout LayoutOf(const AttentionParams& p) {
  if (p.tree_mask != nullptr) {
    return {p.first_pos, static_cast<int>(SplitsOf(static_cast<int64_t>(p.tree_base) + kMaxTreeAttentionRows - 1))};
  }
  if (!p.causal) return {p.first_pos, static_cast<int>(SplitsOf(static_cast<int64_t>(p.first_pos) + p.n_tokens - 1))};
  // The first position read on the device: every query is given the splits
  // of max_ctx positions, as a tree query is.
  if (p.first_pos_at != nullptr) return {0, static_cast<int>(SplitsOf(static_cast<int64_t>(p.max_ctx) - 1))};
  return {p.first_pos, 0};
}

// Bytes of the records of tokens [t0, t1).
size_t RecordBytes(const AttentionParams& p, int t0, int t1) {
  const auto pairs = static_cast<size_t>(PairsBefore(LayoutOf(p), t1) - PairsBefore(LayoutOf(p), t0));
  const size_t record_bytes = static_cast<size_t>(RecordFloats(p.head_dim)) * sizeof(float);
  return SaturatingMul(SaturatingMul(pairs, static_cast<size_t>(p.n_heads)), record_bytes);
}

// (token, split) pairs of tokens [t0, t1).
int64_t Pairs(const AttentionParams& p, int t0, int t1) {
  return PairsBefore(LayoutOf(p), t1) - PairsBefore(LayoutOf(p), t0);
}

int heads_per_block = 0;  // SetAttentionHeadsPerBlock; 0: HeadsPerBlock chooses

// The query heads a split block serves. A decode step (one token) has few
// blocks, a split's dozen or so a kv head, and waits on each block's chain of
// loads: one head a block spreads them over the most SMs. A prefill or a
// tree step has blocks to spare: kMaxBlockHeads heads of a kv head share
// each key and value load, a quarter of the cache traffic at Llama-3-8B's
// group of 4 (SetAttentionHeadsPerBlock overrides, to measure either way).
int HeadsPerBlock(const AttentionParams& p) {
  const int group = p.n_heads / p.n_kv_heads;
  const int want = heads_per_block > 0 ? heads_per_block : (p.n_tokens == 1 ? 1 : kMaxBlockHeads);
  return want < group ? want : group;
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

size_t AttentionScratchBytes(const AttentionParams& p) {
  if (p.n_tokens <= 0 || p.n_heads <= 0 || p.head_dim <= 0 || p.first_pos < 0 ||
      static_cast<int64_t>(p.first_pos) + p.n_tokens > INT32_MAX) {
    return 0;  // Attention refuses these before it looks at the scratch
  }
  if (p.tree_mask != nullptr && (!p.causal || p.n_tokens > kMaxTreeAttentionRows || p.tree_base < 0 ||
                                 static_cast<int64_t>(p.tree_base) + kMaxTreeAttentionRows > INT32_MAX)) {
    return 0;  // likewise
  }
  if (p.first_pos_at != nullptr && (p.tree_mask != nullptr || !p.causal || p.max_ctx < p.n_tokens)) return 0;
  return RecordBytes(p, 0, p.n_tokens);
}

size_t AttentionScratchBytes(const AttentionParams& p, size_t at_most) {
  const size_t all = AttentionScratchBytes(p);
  if (all <= at_most) return all;
  const size_t last = RecordBytes(p, p.n_tokens - 1, p.n_tokens);  // the most of any token
  return last > at_most ? last : at_most;
}

namespace {

// Attention, gating out by sigmoid(gate) and rounding it into *q8 as well
// when they are non-null.
absl::Status RunAttention(const float* q, const void* k_cache, const void* v_cache, float* out,
                          const AttentionParams& p, const Exec& exec, const ActQ8Out* q8, const float* gate) {
  absl::Status args = CheckAttentionArgs(q, k_cache, v_cache, out, p);
  if (!args.ok()) return args;
  if (p.head_dim > kMaxHeadDim) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Attention: head_dim (%d) must be <= %d on CUDA", p.head_dim, kMaxHeadDim));
  }
  // The last token has the most records (in tree mode, as many as any): if
  // they fit, every token's do, and the tokens run in rounds of as many as
  // fit.
  const size_t one_token_bytes = RecordBytes(p, p.n_tokens - 1, p.n_tokens);
  if (exec.scratch_bytes < one_token_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Attention: exec.scratch_bytes (%d) is less than %d, the records of the last token alone "
        "(AttentionScratchBytes: %d for all %d tokens)",
        exec.scratch_bytes, one_token_bytes, AttentionScratchBytes(p), p.n_tokens));
  }
  if (exec.scratch == nullptr) return absl::InvalidArgumentError("Attention: exec.scratch is null");
  const int heads = HeadsPerBlock(p);
  const int head_blocks = p.n_kv_heads * ((p.n_heads / p.n_kv_heads + heads - 1) / heads);
  const int64_t last_pairs = Pairs(p, p.n_tokens - 1, p.n_tokens);
  if (last_pairs * head_blocks > kMaxGridBlocks) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Attention: the last token's %d splits of %d head blocks exceed %d blocks", last_pairs,
                        head_blocks, kMaxGridBlocks));
  }

  const int64_t kv_dim = static_cast<int64_t>(p.n_kv_heads) * p.head_dim;
  AttentionLaunch a = {.q = q,
                       .k_cache = static_cast<const uint8_t*>(k_cache),
                       .v_cache = static_cast<const uint8_t*>(v_cache),
                       .k_row_bytes = static_cast<int64_t>(RowBytes(p.types.k, kv_dim)),
                       .v_row_bytes = static_cast<int64_t>(RowBytes(p.types.v, kv_dim)),
                       .out = out,
                       .partials = static_cast<float*>(exec.scratch),
                       .layout = LayoutOf(p),
                       .tree_mask = p.tree_mask,
                       .first_pos_at = p.first_pos_at,
                       .tree_base = p.tree_base,
                       .all_ctx = p.causal ? 0 : p.first_pos + p.n_tokens,
                       .first_token = 0,
                       .n_round_tokens = 0,
                       .n_heads = p.n_heads,
                       .n_kv_heads = p.n_kv_heads,
                       .head_dim = p.head_dim,
                       .scale = p.scale,
                       .value_pass = false,
                       // fp16 keys (the kernel checks the type): every head of
                       // every row then starts 16-byte aligned too.
                       .wide_keys = p.head_dim % 8 == 0 && reinterpret_cast<uintptr_t>(k_cache) % 16 == 0,
                       .aligned_values = p.head_dim % kValueDims == 0 &&
                                         (p.types.v != GgmlType::kF16 || reinterpret_cast<uintptr_t>(v_cache) % 16 == 0),
                       .q8 = q8 != nullptr ? *q8 : ActQ8Out{},
                       .gate = gate,
                       .heads = heads,
                       .head_blocks = head_blocks,
                       // Decode steps only: a prefill's blocks share each
                       // row among many tokens, which find it in L2 anyway.
                       .prefetch = p.n_tokens <= kMaxDecodeTokens && WeightPrefetchBytes() > 0};
  while (a.first_token < p.n_tokens) {
    // Grow the round while the next token's records fit.
    int end = a.first_token + 1;
    while (end < p.n_tokens && RecordBytes(p, a.first_token, end + 1) <= exec.scratch_bytes &&
           Pairs(p, a.first_token, end + 1) * head_blocks <= kMaxGridBlocks) {
      ++end;
    }
    a.n_round_tokens = end - a.first_token;
    const auto split_blocks = static_cast<unsigned>(Pairs(p, a.first_token, end) * head_blocks);
    // The round's last token has the most splits (tree and non-causal
    // tokens all have as many): with one, the stats pass does everything.
    const bool value_pass = Pairs(p, end - 1, end) > 1;
    // The value pass reads what the stats pass wrote: stream order.
    kv_blocks::Visit(p.types.k, [&](auto k) {
      kv_blocks::Visit(p.types.v, [&](auto v) {
        using Types = CacheTypes<decltype(k)::value, decltype(v)::value>;
        // One head a block, or up to kMaxBlockHeads (registers for four).
        void (*kernel)(AttentionLaunch) =
            heads == 1 ? AttentionSplitKernel<Types, 1> : AttentionSplitKernel<Types, kMaxBlockHeads>;
        a.value_pass = false;
        OCTO_LAUNCH(kernel, split_blocks, kSplitThreads, 0, exec.stream, a);
        if (value_pass) {
          a.value_pass = true;
          OCTO_LAUNCH(kernel, split_blocks, kSplitThreads, 0, exec.stream, a);
        }
      });
    });
    a.first_token = end;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Attention(const float* q, const void* k_cache, const void* v_cache, float* out,
                       const AttentionParams& p, const Exec& exec) {
  return RunAttention(q, k_cache, v_cache, out, p, exec, nullptr, nullptr);
}

bool SetAttentionHeadsPerBlock(int heads) {
  if (heads < 0 || heads > kMaxBlockHeads) return false;
  heads_per_block = heads;
  return true;
}

absl::Status Attention(const float* q, const void* k_cache, const void* v_cache, float* out,
                       const AttentionParams& p, const Exec& exec, const ActQ8Out* rounded, const float* gate) {
  if (gate != nullptr && Overlaps(gate, int64_t{p.n_tokens} * p.n_heads * p.head_dim * 4, out,
                                  int64_t{p.n_tokens} * p.n_heads * p.head_dim * 4)) {
    return absl::InvalidArgumentError("Attention: gate overlaps out");
  }
  if (rounded == nullptr) return RunAttention(q, k_cache, v_cache, out, p, exec, nullptr, gate);
  const ActQ8Out& q8 = *rounded;
  const int64_t width = int64_t{p.n_heads} * p.head_dim;
  if (absl::Status rounding = CheckRounding("Attention", width, q8); !rounding.ok()) return rounding;
  if (absl::Status spans = CheckSpanRounding("Attention", "heads", p.head_dim, q8); !spans.ok()) return spans;
  return RunAttention(q, k_cache, v_cache, out, p, exec, &q8, gate);
}

}  // namespace octo::cuda
