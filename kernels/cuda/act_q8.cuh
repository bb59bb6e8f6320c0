// The device side of act_q8.h: one warp rounds one chunk of x (32 elements
// under kPer32, 256 under kPer256) to its 8-bit quants and scales.
//
// One routine for every kernel that writes 8-bit activations: the decode
// path's own quantize launch (matmul_decode.cu), and the producers that
// round their output for the MatMul that reads it (RmsNorm, AddRmsNorm,
// SiluMul: fused.h), so a fused launch gives the quantize launch's bits by
// construction. The element values come from a functor: x[e] for the
// quantize launch, the producer's own expression for a producer, which also
// stores them (out non-null).
#pragma once

#include <cstdint>

#include "kernels/cuda/act_q8.h"
#include "kernels/cuda/common.cuh"

namespace octo::cuda {

// Elements per rounding chunk (one warp's share).
template <ActQ8Rule R>
inline constexpr int kRoundChunk = ActQ8ChunkOf(R);

// Chunk `chunk` of a flat (rows, cols) x whose cols are a multiple of the
// chunk: elements e = chunk * kRoundChunk<R> + lane + 32 j. Writes out[e] =
// value(e) when out is non-null, q[e], and the chunk's scales (d indexed by
// 32-element chunk, as act_q8.h lays them out). Called by all 32 lanes.
template <ActQ8Rule R, typename Value>
__device__ __forceinline__ void RoundChunk(int64_t chunk, int lane, Value value, float* out, int8_t* q, float* d) {
  constexpr int kPerLane = kRoundChunk<R> / kWarpSize;
  const int64_t base = chunk * kRoundChunk<R>;
  float v[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    v[j] = value(base + lane + j * kWarpSize);
    if (out != nullptr) out[base + lane + j * kWarpSize] = v[j];
  }
  if constexpr (R == ActQ8Rule::kPer32) {
    float amax = fabsf(v[0]);
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    }
    q[base + lane] = ActQ8QuantPer32(v[0], amax);
    if (lane == 0) d[chunk] = __half2float(__float2half_rn(amax / 127.0f));
  } else {
    // The element of largest |x|, the lowest index on ties.
    float best_abs = -1.0f, best = 0.0f;
    int best_index = 0;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      if (fabsf(v[j]) > best_abs) {
        best_abs = fabsf(v[j]);
        best = v[j];
        best_index = lane + j * kWarpSize;
      }
    }
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      const float o_abs = __shfl_xor_sync(0xffffffffu, best_abs, offset);
      const float o = __shfl_xor_sync(0xffffffffu, best, offset);
      const int o_index = __shfl_xor_sync(0xffffffffu, best_index, offset);
      if (o_abs > best_abs || (o_abs == best_abs && o_index < best_index)) {
        best_abs = o_abs;
        best = o;
        best_index = o_index;
      }
    }
    const float iscale = best_abs == 0.0f ? 0.0f : -127.0f / best;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) q[base + lane + j * kWarpSize] = ActQ8QuantPer256(v[j], iscale);
    constexpr int kScales = kQ8KBlock / kQ8Chunk;
    if (lane < kScales) d[chunk * kScales + lane] = iscale == 0.0f ? 0.0f : 1.0f / iscale;
  }
}

// For a producer whose blocks each write one span of columns of x
// (RoundsInSpans), x (n_rows, width) with width whole chunks: called by
// every thread of the block (blockDim.x a multiple of 32), with the same
// arguments, once its threads have written columns [begin, begin + span)
// of every row (begin a multiple of span). Rounds into q8 (laid out for x
// from its row 0) each chunk the span completes:
//   - a span of whole chunks: the block's warps round them;
//   - a chunk of several spans: the block counts its span in
//     q8.arrivals[begin / chunk] (one counter per column chunk, for all the
//     rows); the one that counts last (the chunk's other spans written and
//     fenced before they counted) zeroes the counter for the next launch and
//     rounds the chunk in every row, a warp a row.
// x is read through volatile loads: other blocks wrote part of it.
template <ActQ8Rule R>
__device__ __forceinline__ void RoundColumns(const float* x, int64_t width, int n_rows, int64_t begin, int64_t span,
                                             const ActQ8Out& q8) {
  constexpr int kChunk = kRoundChunk<R>;
  const int warp = static_cast<int>(threadIdx.x / kWarpSize), lane = static_cast<int>(threadIdx.x % kWarpSize);
  const int warps = static_cast<int>(blockDim.x / kWarpSize);
  const volatile float* written = x;
  auto value = [written](int64_t e) { return written[e]; };
  const int64_t row_chunks = width / kChunk;
  if (span % kChunk == 0) {
    __syncthreads();  // the span is written
    const int per_row = static_cast<int>(span / kChunk);  // no run-time division below: it costs registers
    for (int row = 0; row < n_rows; ++row) {
      for (int c = warp; c < per_row; c += warps) {
        RoundChunk<R>(row * row_chunks + begin / kChunk + c, lane, value, nullptr, q8.q, q8.d);
      }
    }
    return;
  }
  const int64_t chunk = begin / kChunk;
  __shared__ bool last_span;
  __threadfence();  // this block's span is visible to the device before it counts
  __syncthreads();  // every thread's part is written and fenced
  if (threadIdx.x == 0) {
    last_span = atomicAdd(&q8.arrivals[chunk], 1u) + 1 == static_cast<uint32_t>(kChunk / static_cast<int>(span));
    if (last_span) q8.arrivals[chunk] = 0;  // every span of the chunk has counted
  }
  __syncthreads();  // last_span is written
  if (!last_span) return;
  __threadfence();
  for (int row = warp; row < n_rows; row += warps) {
    RoundChunk<R>(row * row_chunks + chunk, lane, value, nullptr, q8.q, q8.d);
  }
}

// RoundChunk by q8's rule, chosen when the kernel runs: chunk `chunk` of a
// flat x (value(e) its element e) into q8's quants and scales, and into
// out[e] when out is non-null.
template <typename Value>
__device__ __forceinline__ void RoundChunk(const ActQ8Out& q8, int64_t chunk, int lane, Value value,
                                           float* out = nullptr) {
  if (q8.rule == ActQ8Rule::kPer256) {
    RoundChunk<ActQ8Rule::kPer256>(chunk, lane, value, out, q8.q, q8.d);
  } else {
    RoundChunk<ActQ8Rule::kPer32>(chunk, lane, value, out, q8.q, q8.d);
  }
}

// RoundColumns by q8's rule, chosen when the kernel runs.
__device__ __forceinline__ void RoundColumns(const float* x, int64_t width, int n_rows, int64_t begin, int64_t span,
                                             const ActQ8Out& q8) {
  if (q8.rule == ActQ8Rule::kPer256) {
    RoundColumns<ActQ8Rule::kPer256>(x, width, n_rows, begin, span, q8);
  } else {
    RoundColumns<ActQ8Rule::kPer32>(x, width, n_rows, begin, span, q8);
  }
}

// Calls f(std::integral_constant<ActQ8Rule, rule>) (host side: picks a
// kernel instantiation).
template <typename F>
auto WithActQ8Rule(ActQ8Rule rule, F f) {
  if (rule == ActQ8Rule::kPer256) return f(std::integral_constant<ActQ8Rule, ActQ8Rule::kPer256>());
  return f(std::integral_constant<ActQ8Rule, ActQ8Rule::kPer32>());
}

}  // namespace octo::cuda
