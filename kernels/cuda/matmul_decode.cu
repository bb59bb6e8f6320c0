// cuda::MatMul's decode path (kernels/ops.h): a few tokens against a weight
// matrix read once, each weight decoded from its block as it is read.
// Quantized weights meet 8-bit activations (kernels/cuda/act_q8.h) in integer
// dot products (kernels/cuda/q8_dot.cuh); F32/F16/BF16 weights meet fp32 x.
#include <cstdint>
#include <span>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/block_decode.h"
#include "kernels/cuda/act_q8.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/matmul_paths.h"
#include "kernels/cuda/moe_combine.cuh"
#include "kernels/cuda/q8_dot.cuh"
#include "kernels/cuda/rms_scale.cuh"
#include "kernels/cuda/rope_pair.cuh"
#include "kernels/cuda/gates.cuh"
#include "kernels/cuda/top_k_row.cuh"
#include "kernels/cuda/weight_stage.cuh"

namespace octo::cuda::matmul {
namespace {

constexpr int kWarpsPerBlock = 4;
// The lanes a quantized row may get: up to a block's (the warps of a block
// then share it) -- but one warp a row is faster on an H100 for every 8B
// shape and type (matmul_cuda_bench --row-lanes, tests/bench/RESULTS.md:
// Q4_K 14336 x 4096 at one token 26.2 us with 128 lanes, 25.9 with 64, 23.2
// with 32; Q6_K 57.2 / 47.2 / 44.6): a lane's several units keep more loads
// in flight than the waves more blocks would fill. So kDefaultRowLanes;
// the wider rows stay for measuring (SetDecodeMaxRowLanes). A float row (a
// unit is one element) keeps to one warp.
constexpr int kMaxRowLanes = kWarpsPerBlock * kWarpSize;
constexpr int kDefaultRowLanes = kWarpSize;
int max_row_lanes = kDefaultRowLanes;
constexpr int kQuantizeWarps = 8;  // one rounding chunk per warp

// What a decode kernel reads and writes. Dense: n_tokens rows of x share w.
// Experts: choice i (of n_tokens * k) reads row i (x_per_choice) or i / k of
// x and expert expert_ids[i]'s matrix, w + id * expert_bytes.
struct DecodeArgs {
  const uint8_t* w;
  int64_t rows;       // output rows (of one expert)
  int64_t row_bytes;
  // A group of same-type matrices over one x in one launch (MatMulGroup):
  // part p is blocks [first_block, next part's) of the grid, with its own
  // w, rows, row_bytes and out. n_parts 0: the fields above alone.
  struct Part {
    const uint8_t* w;
    int64_t rows, row_bytes;
    float* out;
    int64_t first_block;
    const float* bias;  // (rows) added to each token's row, or null
  };
  Part parts[kMaxMatMulGroup];
  int n_parts;
  int64_t cols;
  const float* x;     // (n_x, cols): the float path
  const int8_t* xq;   // (n_x, cols): the 8-bit path
  const float* xd;    // (n_x, cols / 32)
  float* out;         // (n_tokens or n_choices, rows)
  const float* bias;  // dense: (rows) added to each token's row (AddBias's sum), or null
  float* residual;    // dense: (n_tokens, rows) that each stored value is added into (Add's sum), or null
  int n_tokens;
  int lanes_per_row;  // a power of two <= kMaxRowLanes: the lanes that share one row
  const int32_t* expert_ids;  // null: dense
  int64_t expert_bytes;
  int n_experts, k, n_choices;
  bool x_per_choice;
  // GluKernel: w is the gate's matrix, w_up the up one's (rows and
  // row_bytes alike); out gets silu(gate) * up, also rounded into
  // round_out when round_out.q is non-null.
  const uint8_t* w_up;
  ActQ8Out round_out;
  // Dense: the bytes at the start of each row the block asks L2 for before
  // its start (WeightPrefetchBytes, device.h), or 0.
  int prefetch_row_bytes;
  // RouterKernel: out's rows are router logits, each token's top-k experts
  // of them picked by the launch's last block; round_x.q non-null: x also
  // rounded into round_x.
  TopKExpertsOut top_k;
  ActQ8Out round_x;
  // RouterKernel: with gate_w non-null, row `rows` is gate_w's one row
  // (the router's type and cols) into gate_out (n_tokens).
  const uint8_t* gate_w;
  float* gate_out;
  // DecodeKernel, dense with residual: norm.arrival non-null, the launch's
  // last block then norms the residual rows into norm.out (NormAfterAdd),
  // rounding them into round_norm when round_norm.q is non-null.
  NormAfterAdd norm;
  ActQ8Out round_norm;
  // DownExpertsKernel (experts with combine.expert_out non-null): the
  // launch's last block then combines the rows into the residual and norms
  // it (CombineNormResidual: norm.weight, eps and arrival; residual;
  // norm.out combine.out), rounding into round_norm when round_norm.q is
  // non-null.
  MoeCombineParams combine;
  // DecodeKernel, a group with heads.arrivals non-null: then each head's
  // last block turns and appends it (TurnAndAppendHeads).
  HeadTails heads;
};

// The lanes of one row: a row's units (32-element chunks, or elements for
// float weights) go round-robin over lanes_per_row lanes. A short row
// (cols 256 of Q4_K is 8 chunks) takes fewer lanes, and a warp then holds
// several rows; a long one several warps' lanes. lanes_per_row depends on cols
// only, so a token's sums do not depend on the batch.
int LanesPerRow(int64_t units, int max_lanes) {
  int lanes = 1;
  while (lanes < max_lanes && lanes < units) lanes *= 2;
  return lanes;
}

// The rows one block holds at lanes_per_row (a power of two: so is this).
__host__ __device__ __forceinline__ int64_t RowsPerBlock(int lanes) {
  return lanes > kWarpSize ? kWarpsPerBlock * kWarpSize / lanes : kWarpsPerBlock * (kWarpSize / lanes);
}

// The part of a group launch (a.n_parts > 0) that block `block` is in.
__device__ __forceinline__ int PartOfBlock(const DecodeArgs& a, int64_t block) {
  int p = 0;
  while (p + 1 < a.n_parts && block >= a.parts[p + 1].first_block) ++p;
  return p;
}

// --- Kernels -----------------------------------------------------------------

// The decode kernels' GridStartAfter prefetch: thread t of a block asks L2
// for the first prefetch_row_bytes of the block's row t (of the gate and
// the up matrix in a GLU launch), which its lanes read first. The weights
// are not what the kernel before writes, so this runs while that one still
// does, and the loads after the start find them in L2. An expert launch
// knows its matrices only from its predecessor's ids: it prefetches none.
__device__ __forceinline__ void PrefetchBlockRows(const DecodeArgs& a) {
  if (a.prefetch_row_bytes == 0) return;
  const int64_t rows_per_block = RowsPerBlock(a.lanes_per_row);
  if (threadIdx.x >= rows_per_block) return;
  int64_t block = blockIdx.x;
  const uint8_t* w = a.w;
  int64_t rows = a.rows, row_bytes = a.row_bytes;
  if (a.n_parts > 0) {
    const int p = PartOfBlock(a, block);
    block -= a.parts[p].first_block;
    w = a.parts[p].w;
    rows = a.parts[p].rows;
    row_bytes = a.parts[p].row_bytes;
  }
  const int64_t row = block * rows_per_block + threadIdx.x;
  if (row >= rows) return;
  const int64_t bytes = row_bytes < a.prefetch_row_bytes ? row_bytes : a.prefetch_row_bytes;
  PrefetchL2(w + row * row_bytes, bytes);
  if (a.w_up != nullptr) PrefetchL2(a.w_up + row * row_bytes, bytes);
}

// One warp per rounding chunk of x (n_tokens * cols / kRoundChunk<R> chunks
// in all), act_q8.h's rule R.
template <ActQ8Rule R>
__global__ void QuantizeKernel(const float* x, int8_t* xq, float* xd, int64_t n_chunks) {
  GridStart();
  const int64_t chunk = static_cast<int64_t>(blockIdx.x) * kQuantizeWarps + threadIdx.x / kWarpSize;
  if (chunk >= n_chunks) return;  // the whole warp
  RoundChunk<R>(chunk, threadIdx.x % kWarpSize, [x](int64_t e) { return x[e]; }, nullptr, xq, xd);
}

// Adds chunk c of a weight row, unpacked, times chunk c of each token's
// 8-bit x (rows of cols at xq, their scales at xd) to acc[t], for the
// n_tokens <= kTokens tokens.
template <typename W, int kTokens>
__device__ __forceinline__ void AddChunk(const q8::Chunk& chunk, int64_t c, const int8_t* xq, const float* xd,
                                         int64_t cols, int n_tokens, float* acc) {
  const int64_t n_chunks = cols / kQ8Chunk;
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    if (t >= n_tokens) break;
    const int4* x4 = reinterpret_cast<const int4*>(xq + t * cols + c * kQ8Chunk);
    const int4 lo = x4[0], hi = x4[1];
    const int words[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    acc[t] += q8::Dot<W>(chunk, words, xd[t * n_chunks + c]);
  }
}

// Adds this lane's share of row w_row · x (rows x_row .. of the 8-bit x) for
// n_tokens tokens to acc: units sub, sub + lanes, ... in order, a unit's
// chunks in order (the types whose lanes take a chunk pair, read straight
// from global memory: Q4_K and Q5_K). Built for one token, the next unit's
// loads are issued before this one is summed, so a lane has two units in
// flight: the loop body's wait for its loads is otherwise a whole memory
// round trip per unit (ptxas does not overlap one iteration's loads with the
// last one's sums). Built for more tokens, a lane's accumulators leave no
// registers for that at 6 blocks per SM (tests/bench/decode_waves.sh), and
// each unit's loads serve several tokens' sums.
template <typename W, int kTokenCap>
struct Q8Dots {
  static constexpr int kTokens = kTokenCap;
  static constexpr int kPerUnit = q8::ChunksPerUnit<W>();
  static constexpr bool kAhead = kTokens == 1;
  __device__ __forceinline__ static void Add(const DecodeArgs& a, const uint8_t* w_row, int64_t x_row, int n_tokens,
                                             int sub, int lanes, float* acc) {
    const int64_t n_chunks = a.cols / kQ8Chunk;
    const int64_t n_units = n_chunks / kPerUnit;
    constexpr int kUnitsPerBlock = W::kChunks / kPerUnit;
    const int8_t* xq = a.xq + x_row * a.cols;
    const float* xd = a.xd + x_row * n_chunks;
    auto load = [&](int64_t u) {
      return W::LoadUnit(w_row + u / kUnitsPerBlock * W::kBytes, static_cast<int>(u % kUnitsPerBlock));
    };
    typename W::Loaded next{};
    if constexpr (kAhead) {
      if (sub < n_units) next = load(sub);
    }
    for (int64_t u = sub; u < n_units; u += lanes) {
      typename W::Loaded loaded;
      if constexpr (kAhead) {
        loaded = next;
        if (u + lanes < n_units) next = load(u + lanes);
      } else {
        loaded = load(u);
      }
      q8::Chunk chunks[kPerUnit];
      W::UnpackLoaded(loaded, static_cast<int>(u % kUnitsPerBlock), chunks);
#pragma unroll
      for (int i = 0; i < kPerUnit; ++i) {
        AddChunk<W, kTokens>(chunks[i], u * kPerUnit + i, xq, xd, a.cols, n_tokens, acc);
      }
    }
  }
};

// Q8Dots for the types whose blocks are not 16-byte units (every type
// whose lanes unpack one chunk: kernels/cuda/weight_stage.cuh): a warp's
// lanes of the row stage a span of as many units -- whole blocks, lanes >=
// units per block -- into shared memory together, then each unpacks its
// unit from there. The units and their order per lane are Q8Dots's, so are
// the sums. The next span's copies are started before this one is summed
// (async copies), so a row has two spans in flight.
template <typename W, int kTokenCap>
struct StagedQ8Dots {
  static constexpr int kTokens = kTokenCap;
  static constexpr int kPerUnit = 1;
  static constexpr int kUnitsPerBlock = W::kChunks;
  static constexpr int kWarpBytes = stage::MaxWarpStageBytes(kUnitsPerBlock, W::kBytes);
  // Buffers a warp, used in turn: the span being summed, the next one in
  // flight, and the one before, which a slower lane may still be reading
  // until the sync after the next wait -- so a span is staged only into a
  // buffer every lane of the row has finished with, one sync a span.
  static constexpr int kBuffers = 3;
  __device__ __forceinline__ static void Add(const DecodeArgs& a, const uint8_t* w_row, int64_t x_row, int n_tokens,
                                             int sub, int lanes, float* acc) {
    __shared__ __align__(16) uint8_t staged_rows[kWarpsPerBlock][kBuffers][kWarpBytes];
    // This warp's lanes of the row: all of them, or its share when warps
    // share the row (a step's units are then a span per warp).
    const int warp_lanes = lanes < kWarpSize ? lanes : kWarpSize;
    const int lane = threadIdx.x % kWarpSize, own = sub % warp_lanes;
    const int group = lane / warp_lanes;  // this row's place in the warp
    const unsigned row_lanes = warp_lanes == kWarpSize ? 0xffffffffu : ((1u << warp_lanes) - 1) << (group * warp_lanes);
    const int span_bytes = stage::SpanStageBytes(warp_lanes / kUnitsPerBlock * W::kBytes);
    const int warp = threadIdx.x / kWarpSize;
    const int64_t n_chunks = a.cols / kQ8Chunk;
    const int64_t n_blocks = n_chunks / kUnitsPerBlock;
    const int blocks_per_span = warp_lanes / kUnitsPerBlock;
    const int64_t step = lanes / kUnitsPerBlock;  // blocks from one of this warp's spans to its next
    const int8_t* xq = a.xq + x_row * a.cols;
    const float* xd = a.xd + x_row * n_chunks;
    // Starts staging the span of blocks from `first` into buffer `buffer`.
    auto stage_span = [&](int64_t first, int buffer) {
      const int64_t last = first + blocks_per_span < n_blocks ? first + blocks_per_span : n_blocks;
      return stage::StageSpan(w_row + first * W::kBytes, w_row + last * W::kBytes,
                              staged_rows[warp][buffer] + group * span_bytes, own, warp_lanes);
    };
    int64_t first = sub / warp_lanes * blocks_per_span;
    int buffer = 0;
    const uint8_t* span = first < n_blocks ? stage_span(first, buffer) : nullptr;
    for (; first < n_blocks; first += step) {
      const int next_buffer = buffer + 1 < kBuffers ? buffer + 1 : 0;
      const uint8_t* next_span = nullptr;
      if (first + step < n_blocks) {
        next_span = stage_span(first + step, next_buffer);
        __pipeline_wait_prior(1);  // this span's copies; the next one's stay in flight
      } else {
        __pipeline_wait_prior(0);
      }
      __syncwarp(row_lanes);  // every lane's copies of the span have landed
      const int64_t c = first * kUnitsPerBlock + own;
      if (c < n_chunks) {
        const q8::Chunk chunk = W::Unpack(span + own / kUnitsPerBlock * W::kBytes, own % kUnitsPerBlock);
        AddChunk<W, kTokens>(chunk, c, xq, xd, a.cols, n_tokens, acc);
      }
      span = next_span;
      buffer = next_buffer;
    }
    __syncwarp(row_lanes);  // the last spans are read before a next call stages
  }
};

// The same for F32/F16/BF16 weights and fp32 x: elements sub, sub + lanes, ...
template <typename D, int kTokenCap>
struct FloatDots {
  static constexpr int kTokens = kTokenCap;
  __device__ __forceinline__ static void Add(const DecodeArgs& a, const uint8_t* w_row, int64_t x_row, int n_tokens,
                                             int sub, int lanes, float* acc) {
    const float* x = a.x + x_row * a.cols;
    for (int64_t e = sub; e < a.cols; e += lanes) {
      const float v = D::Element(w_row + e * D::kBytes, 0);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        if (t >= n_tokens) break;
        acc[t] += v * x[t * a.cols + e];
      }
    }
  }
};

// Sums each row's acc over its lanes, leaving token t's sum in acc[t] at
// the lane that stores the row, which it returns true to (the row is
// RowOfLane's): per token, a __shfl_xor_sync butterfly within each row's
// lanes (the widest stride first), whose result at the row's first lane is
// the tree sum left + right at every level -- the same bits whatever
// n_tokens is. Registers only (no local array). Called by the whole warp.
//
// A row of several warps (lanes > 32): each warp sums its lanes so, and the
// row is the warps' sums added in warp order, through shared memory. Called
// by the whole block then (it syncs), every warp alike.
__device__ __forceinline__ int64_t RowOfLane(int64_t first_row, int lanes) {
  return first_row + (lanes > kWarpSize ? 0 : static_cast<int>(threadIdx.x % kWarpSize) / lanes);
}
template <int kTokens>
__device__ __forceinline__ bool ReduceRows(float* acc, int64_t first_row, int64_t n_rows, int n_tokens, int lanes) {
  __shared__ float warp_sums[kWarpsPerBlock][kTokens];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int warps = lanes > kWarpSize ? lanes / kWarpSize : 1;  // per row
  const bool stores = (warps > 1 ? lane == 0 && warp % warps == 0 : lane % lanes == 0) &&
                      RowOfLane(first_row, lanes) < n_rows;
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    if (t >= n_tokens) break;
    float v = acc[t];
#pragma unroll
    for (int width = kWarpSize / 2; width > 0; width /= 2) {
      if (width < lanes) v += __shfl_xor_sync(0xffffffffu, v, width);
    }
    acc[t] = v;
    if (warps > 1 && lane == 0) warp_sums[warp][t] = v;
  }
  if (warps > 1) __syncthreads();
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    if (t >= n_tokens || !stores) break;
    for (int j = 1; j < warps; ++j) acc[t] += warp_sums[warp + j][t];
  }
  if (warps > 1) __syncthreads();  // read before a next call writes
  return stores;
}

// ReduceRows, then the storing lanes store token t's rows at out[t *
// out_stride + row], plus bias[row] when bias is non-null (the float sum
// AddBias would add after); with residual non-null, each stored value is
// also added into residual at the same place (Add's sum: residual + out).
template <int kTokens>
__device__ __forceinline__ void StoreRows(float* acc, float* out, int64_t out_stride, int64_t first_row,
                                          int64_t n_rows, int n_tokens, int lanes, const float* bias = nullptr,
                                          float* residual = nullptr) {
  if (!ReduceRows<kTokens>(acc, first_row, n_rows, n_tokens, lanes)) return;
  const int64_t row = RowOfLane(first_row, lanes);
  const float b = bias != nullptr ? bias[row] : 0.0f;
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    if (t >= n_tokens) break;
    const float v = bias != nullptr ? acc[t] + b : acc[t];
    out[t * out_stride + row] = v;
    if (residual != nullptr) residual[t * out_stride + row] = residual[t * out_stride + row] + v;
  }
}

// Whether this block is the last of the `blocks` counting themselves in
// `arrival` (zero on entry; the caller zeroes it after): the whole grid for
// a launch's one counter, a head's blocks for a head's. Each block counts
// once what its threads wrote is fenced, and the last, fenced again, sees
// every counted block's writes. Every thread of the block calls it
// (barriers inside) and gets the answer.
__device__ __forceinline__ bool LastBlockToArrive(uint32_t* arrival, unsigned blocks) {
  __shared__ bool last;
  __threadfence();  // this thread's writes are visible to the device before the block counts
  __syncthreads();  // every thread's writes are fenced
  if (threadIdx.x == 0) last = atomicAdd(arrival, 1u) == blocks - 1;
  __syncthreads();  // last is written
  if (last) __threadfence();
  return last;
}

// MatMulAddRmsNorm's norm, after DecodeKernel's dense rows are stored and
// added into a.residual (n_tokens, rows): each block counts itself in
// norm.arrival once its rows are fenced, and the last to count norms every
// token's residual row as RmsNormKernel does -- the scale as its block of
// RowThreads(rows) threads sums (PlayedRmsScaleOf), each value x * scale *
// weight -- into norm.out, rounding it chunk by chunk into round_norm when
// that is set (RoundChunk, as the rounded norm's warps do), and zeroes the
// counter. Rows other blocks added into are read through volatile loads.
// Called by every thread of every block. NormResidualRow: token t's row.
__device__ __forceinline__ void NormResidualRow(const DecodeArgs& a, int t, int dim) {
  const int threads = RowThreads(dim);
  const int warp = static_cast<int>(threadIdx.x / kWarpSize), lane = static_cast<int>(threadIdx.x % kWarpSize);
  const float* weight = a.norm.weight;
  const int64_t first = static_cast<int64_t>(t) * dim;
  const volatile float* row = a.residual + first;
  const float scale = PlayedRmsScaleOf(
      threads,
      [&](int played) {
        double ss = 0.0;
        for (int i = played; i < dim; i += threads) ss += SquareOf(row[i]);
        return ss;
      },
      dim, a.norm.eps);
  float* out = a.norm.out + first;
  auto value = [&](int64_t i) { return row[i] * scale * weight[i]; };
  if (a.round_norm.q != nullptr) {
    ActQ8Out q8 = a.round_norm;  // seen from the row's first element
    q8.q += first;
    q8.d += first / kQ8Chunk;
    const int chunks = dim / ActQ8ChunkOf(q8.rule);
    for (int c = warp; c < chunks; c += blockDim.x / kWarpSize) RoundChunk(q8, c, lane, value, out);
  } else {
    for (int i = threadIdx.x; i < dim; i += blockDim.x) out[i] = value(i);
  }
}
__device__ __forceinline__ void NormResidual(const DecodeArgs& a) {
  if (!LastBlockToArrive(a.norm.arrival, gridDim.x)) return;
  // Token by token (no division of a flat index: 64-bit division costs
  // registers every decode kernel of this kind would hold).
  for (int t = 0; t < a.n_tokens; ++t) NormResidualRow(a, t, static_cast<int>(a.rows));
  if (threadIdx.x == 0) *a.norm.arrival = 0;
}

// MatMulExpertsCombineNorm's tail, after DownExpertsKernel's rows (the
// experts', the shared expert's) are stored: each block counts itself in
// norm.arrival once its rows are fenced, and the last to count, token by
// token, adds the token's combined rows into its residual row (x +
// CombinedValueOf, as CombineAddRmsNorm's launch adds them; the rows other
// blocks stored read through volatile loads) and
// norms that row as NormResidual does, into norm.out; then zeroes the
// counter. Called by every thread of every block.
__device__ __noinline__ void CombineNormResidual(const DecodeArgs& a) {
  if (!LastBlockToArrive(a.norm.arrival, gridDim.x * gridDim.y * gridDim.z)) return;
  const MoeCombineParams& c = a.combine;
  const volatile float* expert_out = c.expert_out;
  const volatile float* shared = c.shared;
  for (int t = 0; t < c.n_rows; ++t) {
    float* x = a.residual + static_cast<int64_t>(t) * c.dim;
    for (int i = threadIdx.x; i < c.dim; i += blockDim.x) x[i] = x[i] + CombinedValueOf(c, expert_out, shared, t, i);
    __syncthreads();  // the row is whole
    NormResidualRow(a, t, c.dim);
  }
  if (threadIdx.x == 0) *a.norm.arrival = 0;
}

// One head of one token after its rows are stored (TurnAndAppendHeads):
// read into shared memory through volatile loads (other blocks stored most
// of it); q's and k's normed with RopeAppendKernel<true>'s expressions (its
// RowThreads(head_dim) block's sum played) when there are norms, turned
// pair by pair (RotatePair) and stored back -- a gated query's into
// split_q, its gate copied to split_gate (SplitGatedQuery's) -- k's and v's
// encoded into the cache row's units of the head (KvAppend's EncodeUnit).
// Called by the whole block.
__device__ __forceinline__ void TurnAndAppendHead(const HeadTails& tails, HeadRole role, float* head, int h, int t) {
  __shared__ float values[kMaxCudaHeadDim];
  const int head_dim = tails.p.head_dim;
  const volatile float* stored = head;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) values[i] = stored[i];
  if (role == HeadRole::kQuery && tails.split_q != nullptr) {
    const int64_t at = (static_cast<int64_t>(t) * tails.p.n_heads + h) * head_dim;
    for (int i = threadIdx.x; i < head_dim; i += blockDim.x) tails.split_gate[at + i] = stored[head_dim + i];
    head = tails.split_q + at;
  }
  __syncthreads();  // the head is in shared memory
  if (role != HeadRole::kValue) {
    if (tails.norms.q != nullptr) {
      const float scale = PlayedRmsScaleOf(
          RowThreads(head_dim), [&](int played) { return played < head_dim ? SquareOf(values[played]) : 0.0; },
          head_dim, tails.norms.eps);
      const float* weight = role == HeadRole::kQuery ? tails.norms.q : tails.norms.k;
      for (int i = threadIdx.x; i < head_dim; i += blockDim.x) values[i] = values[i] * scale * weight[i];
      __syncthreads();  // normed
    }
    const float pos = static_cast<float>(tails.positions[t]);
    for (int i = threadIdx.x; i < tails.p.rope_dim / 2; i += blockDim.x) {
      RotatePair(values, i, pos, tails.p, tails.theta_scale);
    }
    __syncthreads();  // turned
    for (int i = threadIdx.x; i < head_dim; i += blockDim.x) head[i] = values[i];
  }
  if (role != HeadRole::kQuery) {
    const AppendTarget& cache = role == HeadRole::kKey ? tails.keys : tails.values;
    uint8_t* row = cache.Row(t) + h * (role == HeadRole::kKey ? tails.key_head_bytes : tails.value_head_bytes);
    const int units = static_cast<int>(kv_blocks::UnitsOf(cache.type, head_dim));
    for (int u = threadIdx.x; u < units; u += blockDim.x) kv_blocks::EncodeUnit(cache.type, values, row, u);
  }
  __syncthreads();  // values is free for the next head
}

// MatMulGroupRopeAppend's tail, after DecodeKernel's rows of a group with
// a.heads.arrivals are stored: for each head its block's rows meet (a part's
// rows are the heads of its role), the block counts itself in the head's
// counter, and the last of the head's blocks to count turns and appends the
// head of every token (TurnAndAppendHead) and zeroes the counter. 32-bit
// arithmetic (rows within 2^31: CheckMatMul). Called by every thread.
__device__ __noinline__ void TurnAndAppendHeads(const DecodeArgs& a) {
  const HeadTails& tails = a.heads;
  const int p = PartOfBlock(a, blockIdx.x);
  const DecodeArgs::Part& part = a.parts[p];
  const HeadRole role = tails.role[p];
  // A head's rows: a gated query's, its queries and its gate.
  const int span = role == HeadRole::kQuery && tails.split_q != nullptr ? 2 * tails.p.head_dim : tails.p.head_dim;
  const int rows = static_cast<int>(part.rows);
  const int per_block = static_cast<int>(RowsPerBlock(a.lanes_per_row));
  const int first_row = (static_cast<int>(blockIdx.x) - static_cast<int>(part.first_block)) * per_block;
  const int end_row = first_row + per_block < rows ? first_row + per_block : rows;
  uint32_t* counters = tails.arrivals + (role == HeadRole::kQuery ? 0
                                         : role == HeadRole::kKey ? tails.p.n_heads
                                                                  : tails.p.n_heads + tails.k_heads);
  for (int h = first_row / span; h * span < end_row; ++h) {
    const int head_end = (h + 1) * span < rows ? (h + 1) * span : rows;
    const unsigned blocks = static_cast<unsigned>((head_end - 1) / per_block - h * span / per_block + 1);
    if (!LastBlockToArrive(counters + h, blocks)) continue;
    for (int t = 0; t < a.n_tokens; ++t) {
      TurnAndAppendHead(tails, role, part.out + static_cast<int64_t>(t) * rows + static_cast<int64_t>(h) * span,
                        h, t);
    }
    if (threadIdx.x == 0) counters[h] = 0;
  }
}

// Each warp takes 32 / lanes_per_row consecutive rows, or lanes_per_row / 32
// warps one row; grid.x * warps per block covers them. Dense:
// every token of the call. Experts: grid.y strides over the choices, one
// token each. kTail, the launch's tail after the rows: NormResidual
// (kNormTail: dense, with a.residual and a.norm) or TurnAndAppendHeads
// (kHeadsTail: a group with a.heads.arrivals), in kernels of their own (a
// tail in every decode kernel cost 8 to 24 registers, a block or two a SM;
// the two tails in one twin, 14 more for the norm's launches). kCombineTail:
// DownExpertsKernel's expert rows (no dense path; with kOneMatrix a shared
// expert's slice, every choice reading the one matrix a.w), its tail its own.
constexpr int kNoTail = 0, kNormTail = 1, kHeadsTail = 2, kCombineTail = 3;
template <typename Dots, int kTail, bool kOneMatrix = false>
__device__ __forceinline__ void DecodeRows(const DecodeArgs& a) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int lanes = a.lanes_per_row;
  const int warps = lanes > kWarpSize ? lanes / kWarpSize : 1;  // per row, the whole launch alike
  // This block's matrix: a's, or its part's in a group. Read from the
  // parameters in place (grid constant: no local copy of a).
  int64_t block = blockIdx.x;
  const uint8_t* w = a.w;
  int64_t rows = a.rows, row_bytes = a.row_bytes;
  float* out = a.out;
  // The bias and residual wait in shared memory for the store: a pointer
  // kept in a register through the dots cost every Q4_K launch a block per SM.
  __shared__ const float* bias;
  __shared__ float* residual;
  if (a.n_parts > 0) {
    const DecodeArgs::Part& part = a.parts[PartOfBlock(a, block)];
    block -= part.first_block;
    w = part.w;
    rows = part.rows;
    row_bytes = part.row_bytes;
    out = part.out;
    if (threadIdx.x == 0) {
      bias = part.bias;
      residual = nullptr;
    }
  } else if (threadIdx.x == 0) {
    bias = a.bias;
    residual = a.residual;
  }
  __syncthreads();  // bias and residual are written
  const int64_t first_row = warps > 1 ? block * (kWarpsPerBlock / warps) + warp / warps
                                    : (block * kWarpsPerBlock + warp) * (kWarpSize / lanes);
  // A warp past the rows leaves (rows of several warps sync in StoreRows),
  // but for a tail after, which counts whole blocks.
  const bool idle = warps == 1 && first_row >= rows;
  if (kTail == kNoTail && idle) return;
  const int64_t row = warps > 1 ? first_row : first_row + lane / lanes;
  const bool has_row = row < rows;
  const int sub = warps > 1 ? warp % warps * kWarpSize + lane : lane % lanes;
  float acc[Dots::kTokens] = {};
  if (kTail != kCombineTail && a.expert_ids == nullptr) {
    if (!idle) {
      if (has_row) Dots::Add(a, w + row * row_bytes, 0, a.n_tokens, sub, lanes, acc);
      StoreRows<Dots::kTokens>(acc, out, rows, first_row, rows, a.n_tokens, lanes, bias, residual);
    }
    if constexpr (kTail == kNormTail) NormResidual(a);
    if constexpr (kTail == kHeadsTail) TurnAndAppendHeads(a);
    return;
  }
  for (int i = blockIdx.y; i < a.n_choices && !idle; i += gridDim.y) {
    const int32_t e = kOneMatrix ? 0 : a.expert_ids[i];
    const bool known = e >= 0 && e < a.n_experts;
    acc[0] = known ? 0.0f : __int_as_float(0x7fc00000);  // NaN rows for an id out of range
    if (has_row) {
      Dots::Add(a, w + (known ? e : 0) * a.expert_bytes + row * row_bytes, a.x_per_choice ? i : i / a.k, 1, sub,
                lanes, acc);
    }
    StoreRows<Dots::kTokens>(acc, out + static_cast<int64_t>(i) * rows, rows, first_row, rows, 1, lanes);
  }
}
template <typename Dots, int kTail = kNoTail>
__global__ void DecodeKernel(const __grid_constant__ DecodeArgs a) {
  GridStartAfter([&] { PrefetchBlockRows(a); });
  DecodeRows<Dots, kTail>(a);
}

// MatMulExpertsCombineNorm's launch: DecodeKernel's expert rows of a (grid
// z 0) and, with grid.z 2, the shared expert's down rows of `shared` (z 1:
// a token a choice, its one matrix), then the combine and norm
// (CombineNormResidual, a's). A block past its slice's rows stores none
// but counts. One token a choice: built for one token only.
template <typename Dots>
__global__ void DownExpertsKernel(const __grid_constant__ DecodeArgs a, const __grid_constant__ DecodeArgs shared) {
  GridStart();
  if (blockIdx.z == 0) {
    DecodeRows<Dots, kCombineTail>(a);
  } else {
    DecodeRows<Dots, kCombineTail, true>(shared);
  }
  CombineNormResidual(a);
}

// MatMulTopKExperts's launch (fused.h): DecodeKernel's dense rows of a
// router matrix (lanes_per_row at most a warp's) into out, and with
// round_x, x rounded into it a chunk a warp (the quantize launch's
// RoundChunk, over the launch's warps). Then each block counts itself in
// top_k.arrival once its rows are stored and fenced, and the last to count
// picks every token's experts of out (top_k_row.cuh: TopKExperts's bits,
// whatever the block size), reading the rows other blocks stored through
// volatile loads, and zeroes the counter for the next launch. With
// a.gate_w, the warp after the router's rows (lanes_per_row a warp's: a
// row each) sums the gate row as DecodeKernel sums a one-row matrix.
template <typename Dots>
__global__ void RouterKernel(const __grid_constant__ DecodeArgs a) {
  GridStartAfter([&] { PrefetchBlockRows(a); });
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int lanes = a.lanes_per_row;
  const int64_t first_row = (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp) * (kWarpSize / lanes);
  if (first_row < a.rows) {  // the whole warp: no early return, every block counts
    const int64_t row = first_row + lane / lanes;
    float acc[Dots::kTokens] = {};
    if (row < a.rows) Dots::Add(a, a.w + row * a.row_bytes, 0, a.n_tokens, lane % lanes, lanes, acc);
    StoreRows<Dots::kTokens>(acc, a.out, a.rows, first_row, a.rows, a.n_tokens, lanes);
  } else if (first_row == a.rows && a.gate_w != nullptr) {
    float acc[Dots::kTokens] = {};
    Dots::Add(a, a.gate_w, 0, a.n_tokens, lane, lanes, acc);
    StoreRows<Dots::kTokens>(acc, a.gate_out, 1, 0, 1, a.n_tokens, lanes);
  }
  if (a.round_x.q != nullptr) {
    const int64_t n_chunks = a.n_tokens * a.cols / ActQ8ChunkOf(a.round_x.rule);
    const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
    auto value = [&](int64_t e) { return a.x[e]; };
    for (int64_t c = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp; c < n_chunks; c += warps) {
      RoundChunk(a.round_x, c, lane, value);
    }
  }
  if (!LastBlockToArrive(a.top_k.arrival, gridDim.x)) return;
  const int k = a.top_k.k;
  for (int t = 0; t < a.n_tokens; ++t) {
    const volatile float* logits = a.out + t * a.rows;
    top_k::TopKOfRow(logits, static_cast<int>(a.rows), k, a.top_k.normalize, a.top_k.expert_ids + t * k,
                     a.top_k.weights + t * k);
  }
  if (threadIdx.x == 0) *a.top_k.arrival = 0;
}

// MatMulGlu's launch: DecodeKernel's rows, dense, of the gate and the up
// matrix at once -- each row's lanes take the gate row's units then the up
// row's, each summed as DecodeKernel sums it -- and the row's lane stores
// silu(gate) * up (SiluMul's expression). With round_out, each block then
// rounds its rows, a span of columns of out (n_tokens, rows), for the next
// MatMul (act_q8.cuh's RoundColumns: a chunk wider than a block's rows by
// the block that completes it). kExperts: MatMulExpertsGlu's, choice
// `choice`'s one row of x through its expert's gate and up rows
// (DecodeKernel's expert path: NaN rows for an id out of range) into out's
// row `choice`, rounded into round_out's row `choice` (its own chunk
// counters). The body of GluKernel, GluKernelOneToken and GluExpertsKernel.
// kOneMatrix (experts): a shared expert's slice, every choice its one
// matrix (no expert ids).
template <typename Dots, bool kExperts, bool kOneMatrix = false>
__device__ __forceinline__ void GluRows(const DecodeArgs& a, int choice) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int lanes = a.lanes_per_row;
  const int warps = lanes > kWarpSize ? lanes / kWarpSize : 1;  // per row
  const int64_t block_row = static_cast<int64_t>(blockIdx.x) * RowsPerBlock(lanes);
  const int64_t first_row = warps > 1 ? block_row + warp / warps : block_row + warp * (kWarpSize / lanes);
  const int64_t row = RowOfLane(first_row, lanes);
  const int sub = warps > 1 ? warp % warps * kWarpSize + lane : lane % lanes;
  // Dense: every token, from x's row 0. A choice: its row of x through its
  // expert's matrices (byte offset `expert`), each sum from NaN for an id
  // out of range, into out's row `choice`. Pointers are formed where used
  // (kept from here, they cost the 16-token GluKernel a block a SM).
  int64_t expert = 0;
  float start = 0.0f;
  if constexpr (kExperts) {
    const int32_t e = kOneMatrix ? 0 : a.expert_ids[choice];
    const bool known = e >= 0 && e < a.n_experts;
    if (!known) start = __int_as_float(0x7fc00000);
    expert = static_cast<int64_t>(known ? e : 0) * a.expert_bytes;
  }
  const int64_t x_row = kExperts ? (a.x_per_choice ? choice : choice / a.k) : 0;
  const int n_tokens = kExperts ? 1 : a.n_tokens;
  auto out_at = [&](int t) -> float& { return a.out[(kExperts ? int64_t{choice} : t) * a.rows + row]; };
  // The gate's sums go to out and come back for the product, so the up
  // row's reuse the registers (one acc array live, as in DecodeKernel).
  float acc[Dots::kTokens];
#pragma unroll
  for (int t = 0; t < Dots::kTokens; ++t) acc[t] = start;
  if (row < a.rows) Dots::Add(a, a.w + expert + row * a.row_bytes, x_row, n_tokens, sub, lanes, acc);
  const bool stores = ReduceRows<Dots::kTokens>(acc, first_row, a.rows, n_tokens, lanes);
#pragma unroll
  for (int t = 0; t < Dots::kTokens; ++t) {
    if (t < n_tokens && stores) out_at(t) = acc[t];
    acc[t] = start;
  }
  if (row < a.rows) Dots::Add(a, a.w_up + expert + row * a.row_bytes, x_row, n_tokens, sub, lanes, acc);
  ReduceRows<Dots::kTokens>(acc, first_row, a.rows, n_tokens, lanes);
#pragma unroll
  for (int t = 0; t < Dots::kTokens; ++t) {
    if (t >= n_tokens || !stores) break;
    out_at(t) = SiluTimes(out_at(t), acc[t]);
  }
  if (a.round_out.q == nullptr) return;
  // No warp has left: every one reaches RoundColumns's barriers. The
  // block's rows are a span of out's columns (the last block's may be
  // short), worked out again here: fewer registers than keeping them. A
  // choice's row is rounded into round_out's row `choice` (its quants,
  // scales and counters).
  const int64_t rows_per_block = RowsPerBlock(a.lanes_per_row);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  const int64_t span = a.rows - first < rows_per_block ? a.rows - first : rows_per_block;
  if constexpr (kExperts) {
    const int64_t row_first = static_cast<int64_t>(choice) * a.rows;
    RoundColumns(a.out + row_first, a.rows, 1, first, span, ActQ8From(a.round_out, row_first));
  } else {
    RoundColumns(a.out, a.rows, n_tokens, first, span, a.round_out);
  }
}

// GluRows's launches. Built for one token it is held to 64 registers, 8
// blocks a SM, which ptxas meets for every type with no spill (60-72
// unbounded); built for 16 tokens any bound costs registers or spills (Q4_K
// 79 unbounded, 81 under a 128-thread bound; IQ3_S spills at 80), so it has
// none. DecodeKernel, whose expert loop needs more, spills when so held.
template <typename Dots>
__global__ void GluKernel(const __grid_constant__ DecodeArgs a) {
  GridStartAfter([&] { PrefetchBlockRows(a); });
  GluRows<Dots, false>(a, -1);
}
template <typename Dots>
__global__ void __launch_bounds__(kWarpsPerBlock * kWarpSize, 8)
    GluKernelOneToken(const __grid_constant__ DecodeArgs a) {
  GridStartAfter([&] { PrefetchBlockRows(a); });
  GluRows<Dots, false>(a, -1);
}
// The experts' (one token each): grid.y strides over the choices. Unbounded,
// as DecodeKernel, whose expert loop spills when held to 64 registers.
template <typename Dots>
__global__ void GluExpertsKernel(const __grid_constant__ DecodeArgs a) {
  GridStart();
  for (int i = blockIdx.y; i < a.n_choices; i += gridDim.y) GluRows<Dots, true>(a, i);
}
// And with a shared expert's gate and up: blocks of grid.z 1 take `shared`
// (a token a choice, its one matrix); a block past its slice's rows leaves.
// A kernel of its own: it takes 96 registers (Q4_K, sm_90; 5 blocks a SM)
// where GluExpertsKernel takes 79 (6), which the launches without a shared
// expert keep. Whether the two launches it saves are worth a block a SM is
// a GPU's question.
template <typename Dots>
__global__ void GluExpertsSharedKernel(const __grid_constant__ DecodeArgs a,
                                       const __grid_constant__ DecodeArgs shared) {
  GridStart();
  if (blockIdx.z == 0) {
    if (static_cast<int64_t>(blockIdx.x) * RowsPerBlock(a.lanes_per_row) >= a.rows) return;  // the whole block
    for (int i = blockIdx.y; i < a.n_choices; i += gridDim.y) GluRows<Dots, true>(a, i);
  } else {
    if (static_cast<int64_t>(blockIdx.x) * RowsPerBlock(shared.lanes_per_row) >= shared.rows) return;
    for (int i = blockIdx.y; i < shared.n_choices; i += gridDim.y) GluRows<Dots, true, true>(shared, i);
  }
}

// --- Launchers ---------------------------------------------------------------

// Quantizes n_x rows of x into the scratch (act_q8.h's layout and rules).
absl::Status Quantize(GgmlType type, const float* x, int64_t n_x, int64_t cols, const Exec& exec, int8_t** xq,
                      float** xd) {
  const ActQ8Out act = ActQ8At(exec.scratch, ActQ8RuleFor(type), n_x, cols);
  *xq = act.q;
  *xd = act.d;
  return WithActQ8Rule(act.rule, [&](auto rule) {
    constexpr ActQ8Rule R = decltype(rule)::value;
    const int64_t n_chunks = n_x * cols / kRoundChunk<R>;
    const unsigned grid = static_cast<unsigned>((n_chunks + kQuantizeWarps - 1) / kQuantizeWarps);
    OCTO_LAUNCH(QuantizeKernel<R>, grid, kQuantizeWarps * kWarpSize, 0, exec.stream, x, act.q, act.d, n_chunks);
    return absl::OkStatus();
  });
}

// Launches the decode kernel for w's type over `a` (grid.y choices), with
// lanes_per_row from the row's units (elements, chunks or chunk pairs); a
// group's parts get consecutive ranges of grid.x. With `shared` (an expert
// launch's shared expert slice: the GLU's, the combining down's), grid.z 2
// and grid.x the larger slice's.
absl::Status Launch(GgmlType type, DecodeArgs a, unsigned grid_y, StreamHandle stream,
                    const DecodeArgs* shared = nullptr) {
  DecodeArgs b = shared != nullptr ? *shared : DecodeArgs{};
  auto blocks_of = [&](DecodeArgs& args, int64_t units, int max_lanes) {
    args.lanes_per_row = LanesPerRow(units, max_lanes);
    const int64_t rows_per_block = RowsPerBlock(args.lanes_per_row);
    auto blocks = [&](int64_t rows) { return (rows + rows_per_block - 1) / rows_per_block; };
    int64_t total = args.n_parts > 0 ? 0 : blocks(args.rows);
    for (int p = 0; p < args.n_parts; ++p) {
      args.parts[p].first_block = total;
      total += blocks(args.parts[p].rows);
    }
    return total;
  };
  // units, shared_units: a row's of a, of the shared slice (the two differ
  // in columns, not in type).
  auto grid = [&](int64_t units, int64_t shared_units, int max_lanes) {
    const int64_t x = blocks_of(a, units, max_lanes);
    if (shared == nullptr) return dim3(static_cast<unsigned>(x), grid_y);
    const int64_t x_shared = blocks_of(b, shared_units, max_lanes);
    return dim3(static_cast<unsigned>(x > x_shared ? x : x_shared), grid_y, 2);
  };
  a.prefetch_row_bytes = a.expert_ids == nullptr ? WeightPrefetchBytes() : 0;
  const absl::Status unknown = absl::InternalError("MatMul: no decode kernel for this type");
  // A one-token launch (most decode steps, every expert launch) runs the
  // kernels built for one token: one accumulator, not kMaxDecodeTokens, so
  // fewer registers and more blocks per SM (tests/bench/decode_waves.sh).
  // Token 0's sums are the same in both.
  auto with_tokens = [&](auto f) {
    return a.n_tokens == 1 ? f(std::integral_constant<int, 1>{}) : f(std::integral_constant<int, kMaxDecodeTokens>{});
  };
  // DecodeKernel, or with a tail (a norm after, heads to turn) its twin.
  auto decode = [&](auto dots, dim3 blocks) {
    using Dots = decltype(dots);
    if (a.norm.arrival != nullptr) {
      OCTO_LAUNCH((DecodeKernel<Dots, kNormTail>), blocks, kWarpsPerBlock * kWarpSize, 0, stream, a);
    } else if (a.heads.arrivals != nullptr) {
      OCTO_LAUNCH((DecodeKernel<Dots, kHeadsTail>), blocks, kWarpsPerBlock * kWarpSize, 0, stream, a);
    } else {
      OCTO_LAUNCH(DecodeKernel<Dots>, blocks, kWarpsPerBlock * kWarpSize, 0, stream, a);
    }
    return absl::OkStatus();
  };
  return with_tokens([&](auto tokens) {
    constexpr int kTokens = decltype(tokens)::value;
    auto float_launch = [&](auto decoder) {
      return decode(FloatDots<decltype(decoder), kTokens>{}, grid(a.cols, b.cols, kWarpSize));
    };
    // The float types alone (block_decode::WithDecoder would build a float
    // kernel for every quantized type too, never launched).
    switch (type) {
      case GgmlType::kF32: return float_launch(block_decode::Decoder<GgmlType::kF32>{});
      case GgmlType::kF16: return float_launch(block_decode::Decoder<GgmlType::kF16>{});
      case GgmlType::kBF16: return float_launch(block_decode::Decoder<GgmlType::kBF16>{});
      default: break;
    }
    return q8::WithQ8Weights(type, unknown, [&](auto weights) {
      using W = decltype(weights);
      using Dots =
          std::conditional_t<q8::ChunksPerUnit<W>() == 1, StagedQ8Dots<W, kTokens>, Q8Dots<W, kTokens>>;
      const dim3 blocks =
          grid(a.cols / kQ8Chunk / Dots::kPerUnit, b.cols / kQ8Chunk / Dots::kPerUnit, max_row_lanes);
      if constexpr (kTokens == 1) {
        if (a.combine.expert_out != nullptr) {
          OCTO_LAUNCH(DownExpertsKernel<Dots>, blocks, kWarpsPerBlock * kWarpSize, 0, stream, a,
                      shared != nullptr ? b : a);
          return absl::OkStatus();
        }
      }
      if (a.w_up != nullptr) {
        if constexpr (kTokens == 1) {
          if (a.expert_ids != nullptr && shared != nullptr) {
            OCTO_LAUNCH(GluExpertsSharedKernel<Dots>, blocks, kWarpsPerBlock * kWarpSize, 0, stream, a, b);
            return absl::OkStatus();
          }
          if (a.expert_ids != nullptr) {
            OCTO_LAUNCH(GluExpertsKernel<Dots>, blocks, kWarpsPerBlock * kWarpSize, 0, stream, a);
            return absl::OkStatus();
          }
          OCTO_LAUNCH(GluKernelOneToken<Dots>, blocks, kWarpsPerBlock * kWarpSize, 0, stream, a);
        } else {
          OCTO_LAUNCH(GluKernel<Dots>, blocks, kWarpsPerBlock * kWarpSize, 0, stream, a);
        }
        return absl::OkStatus();
      }
      return decode(Dots{}, blocks);
    });
  });
}

// A dense launch's arguments: w's rows over n_tokens rows of x's 8-bit
// activations into out.
DecodeArgs DenseArgs(const WeightMatrix& w, int64_t row_bytes, const ActQ8View& act, float* out, int n_tokens) {
  DecodeArgs a{};
  a.w = static_cast<const uint8_t*>(w.data);
  a.rows = w.rows;
  a.row_bytes = row_bytes;
  a.cols = w.cols;
  a.out = out;
  a.n_tokens = n_tokens;
  a.xq = act.q;
  a.xd = act.d;
  return a;
}

}  // namespace

size_t DecodeScratchBytes(GgmlType type, int64_t cols, int64_t n_x) {
  return IsFloatWeight(type) ? 0 : ActQ8Bytes(n_x, cols);
}

absl::Status QuantizeActivations(GgmlType type, const float* x, int n_tokens, int64_t cols, const Exec& exec,
                                 ActQ8View* act) {
  return Quantize(type, x, n_tokens, cols, exec, &act->q, &act->d);
}

absl::Status DecodeQuantized(const WeightMatrix& w, int64_t row_bytes, const float* x, const ActQ8View& act,
                             float* out, int n_tokens, StreamHandle stream, const float* bias, float* residual,
                             const NormAfterAdd* norm, const ActQ8Out* round_norm) {
  DecodeArgs a = DenseArgs(w, row_bytes, act, out, n_tokens);
  a.x = x;
  a.bias = bias;
  a.residual = residual;
  if (norm != nullptr) a.norm = *norm;
  if (round_norm != nullptr) a.round_norm = *round_norm;
  return Launch(w.type, a, 1, stream);
}

absl::Status DecodeQuantizedGroup(std::span<const WeightMatrix> ws, std::span<const int64_t> row_bytes,
                                  const float* x, const ActQ8View& act, std::span<float* const> outs, int n_tokens,
                                  StreamHandle stream, std::span<const float* const> biases,
                                  const HeadTails* tails) {
  auto bias_of = [&](size_t p) { return biases.empty() ? nullptr : biases[p]; };
  if (ws.size() == 1 && tails == nullptr) return DecodeQuantized(ws[0], row_bytes[0], x, act, outs[0], n_tokens, stream, bias_of(0));
  DecodeArgs a{};
  a.cols = ws[0].cols;
  a.x = x;
  a.n_tokens = n_tokens;
  a.xq = act.q;
  a.xd = act.d;
  a.n_parts = static_cast<int>(ws.size());
  for (size_t p = 0; p < ws.size(); ++p) {
    a.parts[p] =
        DecodeArgs::Part{static_cast<const uint8_t*>(ws[p].data), ws[p].rows, row_bytes[p], outs[p], 0, bias_of(p)};
  }
  if (tails != nullptr) a.heads = *tails;
  return Launch(ws[0].type, a, 1, stream);
}

bool SetDecodeMaxRowLanes(int lanes) {
  if (lanes < kWarpSize || lanes > kMaxRowLanes || (lanes & (lanes - 1)) != 0) return false;
  max_row_lanes = lanes;
  return true;
}

int64_t DecodeRowsPerBlock(GgmlType type, int64_t cols) {
  return q8::WithQ8Weights(type, int64_t{0}, [&](auto weights) {
    using W = decltype(weights);
    return RowsPerBlock(LanesPerRow(cols / kQ8Chunk / q8::ChunksPerUnit<W>(), max_row_lanes));
  });
}

absl::Status DecodeGlu(const WeightMatrix& gate, const WeightMatrix& up, int64_t row_bytes, const ActQ8View& act,
                       float* out, int n_tokens, const ActQ8Out* round_out, StreamHandle stream) {
  DecodeArgs a = DenseArgs(gate, row_bytes, act, out, n_tokens);
  a.w_up = static_cast<const uint8_t*>(up.data);
  if (round_out != nullptr) a.round_out = *round_out;
  return Launch(gate.type, a, 1, stream);
}

absl::Status DecodeTopK(const WeightMatrix& w, int64_t row_bytes, const float* x, float* out, int n_tokens,
                        const TopKExpertsOut& top_k, const ActQ8Out* round_x, const SharedGateRow* gate,
                        StreamHandle stream) {
  DecodeArgs a = DenseArgs(w, row_bytes, ActQ8View{}, out, n_tokens);
  a.x = x;
  a.top_k = top_k;
  if (round_x != nullptr) a.round_x = *round_x;
  a.lanes_per_row = LanesPerRow(w.cols, kWarpSize);
  a.prefetch_row_bytes = WeightPrefetchBytes();
  int64_t rows = w.rows;
  if (gate != nullptr) {
    a.gate_w = static_cast<const uint8_t*>(gate->w.data);
    a.gate_out = gate->out;
    ++rows;
  }
  const dim3 grid(static_cast<unsigned>((rows + RowsPerBlock(a.lanes_per_row) - 1) / RowsPerBlock(a.lanes_per_row)));
  auto launch = [&](auto decoder) {
    // One token's kernel or kMaxDecodeTokens's, as Launch picks them.
    if (n_tokens == 1) {
      OCTO_LAUNCH(RouterKernel<FloatDots<decltype(decoder), 1>>, grid, kWarpsPerBlock * kWarpSize, 0, stream, a);
    } else {
      OCTO_LAUNCH(RouterKernel<FloatDots<decltype(decoder), kMaxDecodeTokens>>, grid, kWarpsPerBlock * kWarpSize, 0,
                  stream, a);
    }
    return absl::OkStatus();
  };
  switch (w.type) {
    case GgmlType::kF32: return launch(block_decode::Decoder<GgmlType::kF32>{});
    case GgmlType::kF16: return launch(block_decode::Decoder<GgmlType::kF16>{});
    case GgmlType::kBF16: return launch(block_decode::Decoder<GgmlType::kBF16>{});
    default: return absl::InternalError("MatMulTopKExperts: a router of quantized weights");
  }
}

absl::Status Decode(const WeightMatrix& w, int64_t row_bytes, const float* x, float* out, int n_tokens,
                    const Exec& exec) {
  ActQ8View act;
  if (!IsFloatWeight(w.type)) {
    absl::Status quantized = QuantizeActivations(w.type, x, n_tokens, w.cols, exec, &act);
    if (!quantized.ok()) return quantized;
  }
  return DecodeQuantized(w, row_bytes, x, act, out, n_tokens, exec.stream);
}

namespace {

// An expert launch's arguments for ws (as DecodeExperts takes them), x's
// activations `rounded` or rounded here.
absl::StatusOr<DecodeArgs> ExpertArgs(std::span<const WeightMatrix> ws, int64_t rows, int64_t row_bytes,
                                      int64_t expert_bytes, const int32_t* expert_ids, const float* x,
                                      std::span<float* const> outs, const MatMulExpertsParams& p, const Exec& exec,
                                      const ActQ8View* rounded) {
  const WeightMatrix& w = ws[0];
  DecodeArgs a{};
  a.w = static_cast<const uint8_t*>(w.data);
  a.rows = rows;
  a.row_bytes = row_bytes;
  a.cols = w.cols;
  a.x = x;
  a.out = outs[0];
  if (ws.size() > 1) {
    a.n_parts = static_cast<int>(ws.size());
    for (size_t i = 0; i < ws.size(); ++i) {
      a.parts[i] = DecodeArgs::Part{static_cast<const uint8_t*>(ws[i].data), rows, row_bytes, outs[i], 0, nullptr};
    }
  }
  a.n_tokens = 1;
  a.expert_ids = expert_ids;
  a.expert_bytes = expert_bytes;
  a.n_experts = p.n_experts;
  a.k = p.k;
  a.n_choices = p.n_tokens * p.k;
  a.x_per_choice = p.x_per_choice;
  if (rounded != nullptr) {
    a.xq = rounded->q;
    a.xd = rounded->d;
  } else if (!IsFloatWeight(w.type)) {
    int8_t* xq = nullptr;
    float* xd = nullptr;
    absl::Status quantized = Quantize(w.type, x, p.x_per_choice ? a.n_choices : p.n_tokens, w.cols, exec, &xq, &xd);
    if (!quantized.ok()) return quantized;
    a.xq = xq;
    a.xd = xd;
  }
  return a;
}

// grid.y of an expert launch: a block row per choice, up to its limit.
unsigned ChoiceBlocks(int n_choices) {
  constexpr int kMaxGridY = 65535;
  return static_cast<unsigned>(n_choices < kMaxGridY ? n_choices : kMaxGridY);
}

// The shared expert's slice of an expert launch of p's tokens (SharedSlice):
// a token a choice through its one matrix, x rounded at xq and xd.
DecodeArgs SharedArgs(const SharedSlice& slice, const MatMulExpertsParams& p, const int8_t* xq, const float* xd) {
  DecodeArgs s{};
  s.w = static_cast<const uint8_t*>(slice.w->data);
  s.w_up = slice.up != nullptr ? static_cast<const uint8_t*>(slice.up->data) : nullptr;
  s.rows = slice.w->rows;
  s.row_bytes = slice.row_bytes;
  s.cols = slice.w->cols;
  s.out = slice.out;
  s.n_tokens = 1;
  s.n_experts = 1;
  s.k = 1;
  s.n_choices = p.n_tokens;
  s.xq = xq;
  s.xd = xd;
  if (slice.round_out != nullptr) s.round_out = *slice.round_out;
  return s;
}

}  // namespace

absl::Status DecodeExperts(std::span<const WeightMatrix> ws, int64_t rows, int64_t row_bytes, int64_t expert_bytes,
                           const int32_t* expert_ids, const float* x, std::span<float* const> outs,
                           const MatMulExpertsParams& p, const Exec& exec, const ActQ8View* rounded,
                           const CombineAfterExperts* tail, const ActQ8Out* round_norm, const SharedSlice* shared) {
  absl::StatusOr<DecodeArgs> a = ExpertArgs(ws, rows, row_bytes, expert_bytes, expert_ids, x, outs, p, exec, rounded);
  if (!a.ok()) return a.status();
  if (tail != nullptr) {
    a->combine = tail->combine;
    a->residual = tail->x;
    a->norm = NormAfterAdd{tail->weight, tail->combine.out, tail->eps, tail->arrival};
    if (round_norm != nullptr) a->round_norm = *round_norm;
  }
  if (shared != nullptr) {
    const DecodeArgs s = SharedArgs(*shared, p, shared->x.q, shared->x.d);
    return Launch(ws[0].type, *a, ChoiceBlocks(a->n_choices), exec.stream, &s);
  }
  return Launch(ws[0].type, *a, ChoiceBlocks(a->n_choices), exec.stream);
}

absl::Status DecodeExpertsGlu(const WeightMatrix& gate, const WeightMatrix& up, int64_t rows, int64_t row_bytes,
                              int64_t expert_bytes, const int32_t* expert_ids, const float* x, float* out,
                              const MatMulExpertsParams& p, const Exec& exec, const ActQ8Out* round_out,
                              const ActQ8View* rounded, const SharedSlice* shared) {
  float* const outs[] = {out};
  absl::StatusOr<DecodeArgs> a =
      ExpertArgs({&gate, 1}, rows, row_bytes, expert_bytes, expert_ids, x, outs, p, exec, rounded);
  if (!a.ok()) return a.status();
  a->w_up = static_cast<const uint8_t*>(up.data);
  if (round_out != nullptr) a->round_out = *round_out;
  if (shared != nullptr) {
    const DecodeArgs s = SharedArgs(*shared, p, a->xq, a->xd);
    return Launch(gate.type, *a, ChoiceBlocks(a->n_choices), exec.stream, &s);
  }
  return Launch(gate.type, *a, ChoiceBlocks(a->n_choices), exec.stream);
}

}  // namespace octo::cuda::matmul
