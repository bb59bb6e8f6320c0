// Wide loads for weight blocks that are not 16-byte units (every quantized
// type but Q4_K and Q5_K: Q6_K's 210 bytes, Q8_0's 34, the IQ types' 50-110):
// the lanes of one row copy a span of whole blocks into shared memory in
// aligned 16-byte loads (4-byte words at the span's two unaligned ends),
// each byte of the span once, and then unpack from shared memory. The
// decode path (matmul_decode.cu) stages its spans here; no repacked copy of
// the weights is needed, in VRAM or after a streamed layer's copy.
//
// The copies are asynchronous (cp.async, sm_80 on: cuda_pipeline_primitives.h
// through common.cuh; the executor queues them until their wait, as
// kernels/cuda/sim/README.md says), so a row's next span is in flight while
// its lanes sum this one.
//
// Reads: the aligned words that hold the span's bytes, so up to 3 bytes
// past its end (within the row's matrix, except at the matrix's end) and up
// to 2 before its start (within the matrix: its start is 2-byte aligned
// and an allocation starts 256-byte aligned). Device allocations are whole
// kAllocationUnit units (kernels/cuda/device.h), so the last word of a
// matrix never passes its allocation.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace octo::cuda::stage {

// The shared bytes one span of `span_bytes` needs: the span at its address's
// offset within a 16-byte unit, through the word that holds its last byte.
__host__ __device__ constexpr int SpanStageBytes(int span_bytes) { return (span_bytes + 15 + 3 + 15) / 16 * 16; }

// The shared bytes a warp needs to stage, for every row width, one span per
// row: kWarpSize / lanes rows of lanes units each, units_per_block units to
// a block of block_bytes (lanes from units_per_block to kWarpSize).
__host__ __device__ constexpr int WarpStageBytes(int units_per_block, int block_bytes, int lanes) {
  return kWarpSize / lanes * SpanStageBytes(lanes / units_per_block * block_bytes);
}
__host__ __device__ constexpr int MaxWarpStageBytes(int units_per_block, int block_bytes) {
  int most = 0;
  for (int lanes = units_per_block; lanes <= kWarpSize; lanes *= 2) {
    const int bytes = WarpStageBytes(units_per_block, block_bytes, lanes);
    if (bytes > most) most = bytes;
  }
  return most;
}

// Starts copying bytes [begin, end) to `shared` (16-byte aligned,
// SpanStageBytes of end - begin), lanes `lanes` of the caller's row sharing
// the loads (this lane is `sub` of them), as one committed group of this
// lane's async copies, and returns where begin's byte will land: byte begin
// + i at the result + i. Shared byte j holds the global byte at begin's
// 16-byte unit + j, so every 16-byte load is a 16-byte store. Before
// reading, each lane waits for its group (__pipeline_wait_prior) and then
// the lanes sync (__syncwarp); nothing may read or write those shared bytes
// in between.
__device__ __forceinline__ const uint8_t* StageSpan(const uint8_t* begin, const uint8_t* end, uint8_t* shared, int sub,
                                                   int lanes) {
  const int skew = static_cast<int>(reinterpret_cast<uintptr_t>(begin) % 16);
  const uint8_t* base = begin - skew;  // 16-byte aligned
  const int n = static_cast<int>(end - base);
  const int words_end = (n + 3) / 4 * 4;                  // through the word holding the last byte
  const int head_end = skew == 0 ? 0 : 16;                // the unaligned unit: words
  const int vectors_begin = head_end < words_end ? head_end : words_end;
  const int vectors_end = words_end / 16 * 16 > vectors_begin ? words_end / 16 * 16 : vectors_begin;
  const int head_begin = skew / 4 * 4;
  const int n_head = (vectors_begin - head_begin) / 4;
  const int n_words = n_head + (words_end - vectors_end) / 4;
  for (int i = sub; i < n_words; i += lanes) {
    const int at = i < n_head ? head_begin + 4 * i : vectors_end + 4 * (i - n_head);
    __pipeline_memcpy_async(shared + at, base + at, 4);
  }
  const int n_vectors = (vectors_end - vectors_begin) / 16;
  for (int i = sub; i < n_vectors; i += lanes) {
    const int at = vectors_begin + 16 * i;
    __pipeline_memcpy_async(shared + at, base + at, 16);
  }
  __pipeline_commit();
  return shared + skew;
}

}  // namespace octo::cuda::stage
