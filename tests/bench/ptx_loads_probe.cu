// The weight loads of cuda::MatMul's decode path, made countable, per type
// (tests/bench/ptx_loads.sh compiles this to PTX and counts the global loads
// of each entry):
//  - Q4_K and Q5_K lanes read their chunk pair straight from global memory
//    (q8::UnpackUnit): probe_<TYPE> runs one lane's unpack of one unit, the
//    unit a runtime value as in the decode loop;
//  - every other type is staged (kernels/cuda/weight_stage.cuh): probe_<TYPE>
//    runs the staging of one warp's span (32 units) -- its loads' widths are
//    the type's -- and probe_<TYPE>_unpack one lane's unpack from shared
//    memory, whose global loads are the IQ types' grid tables (no weight
//    bytes: the weights come from shared memory there).
// The units per block, the block size and whether the type is staged come
// out as the globals probe_<TYPE>_units, probe_<TYPE>_bytes and
// probe_<TYPE>_staged. Not part of the build: the script compiles it, with
// OCTO_PTX_PROBE_TYPES naming a file of PROBE(TYPE) lines.
#include <cstdint>

#include "kernels/cuda/q8_dot.cuh"
#include "kernels/cuda/weight_stage.cuh"

namespace octo::cuda::q8 {

template <GgmlType T>
inline constexpr bool kStaged = ChunksPerUnit<Q8Weights<T>>() == 1;

// Every unpacked value into out, so no load is dead.
__device__ __forceinline__ void Keep(const Chunk* chunks, int n, int* out) {
  int sum = 0;
  for (int i = 0; i < n; ++i) {
    const Chunk& c = chunks[i];
    for (int w = 0; w < 8; ++w) sum += c.q[w];
    sum += __float_as_int(c.d[0]) + __float_as_int(c.d[1]) + __float_as_int(c.m[0]) + __float_as_int(c.m[1]);
  }
  out[0] = sum;
}

// Direct: one lane's unpack of unit `unit` of the block at `block`.
// Staged: the staging of a warp's span of 32 units from `block` (a
// runtime address, as a row's spans are), this lane one of the 32.
template <GgmlType T>
__device__ __forceinline__ void Probe(const uint8_t* block, int unit, int* out) {
  using W = Q8Weights<T>;
  if constexpr (kStaged<T>) {
    constexpr int kSpan = 32 / W::kChunks * W::kBytes;
    __shared__ __align__(16) uint8_t shared[stage::SpanStageBytes(kSpan)];
    const uint8_t* span = stage::StageSpan(block, block + kSpan, shared, unit % 32, 32);
    __pipeline_wait_prior(0);
    __syncwarp();
    out[0] = span[unit];
  } else {
    Chunk chunks[ChunksPerUnit<W>()];
    UnpackUnit<W>(block, unit, chunks);
    Keep(chunks, ChunksPerUnit<W>(), out);
  }
}

// Staged types: one lane's unpack of unit `unit` from a staged span.
template <GgmlType T>
__device__ __forceinline__ void ProbeUnpack(int offset, int unit, int* out) {
  extern __shared__ __align__(16) uint8_t staged[];
  const Chunk chunk = Q8Weights<T>::Unpack(staged + offset, unit);
  Keep(&chunk, 1, out);
}

}  // namespace octo::cuda::q8

#define PROBE(TYPE)                                                                                        \
  extern "C" __global__ void probe_##TYPE(const uint8_t* block, int unit, int* out) {                      \
    octo::cuda::q8::Probe<octo::GgmlType::k##TYPE>(block, unit, out);                                      \
  }                                                                                                        \
  extern "C" __global__ void probe_##TYPE##_unpack(int offset, int unit, int* out) {                       \
    if constexpr (octo::cuda::q8::kStaged<octo::GgmlType::k##TYPE>) {                                      \
      octo::cuda::q8::ProbeUnpack<octo::GgmlType::k##TYPE>(offset, unit, out);                             \
    }                                                                                                      \
  }                                                                                                        \
  extern "C" __device__ const int probe_##TYPE##_units =                                                  \
      octo::cuda::q8::Q8Weights<octo::GgmlType::k##TYPE>::kChunks /                                        \
      octo::cuda::q8::ChunksPerUnit<octo::cuda::q8::Q8Weights<octo::GgmlType::k##TYPE>>();                \
  extern "C" __device__ const int probe_##TYPE##_bytes = octo::cuda::q8::Q8Weights<octo::GgmlType::k##TYPE>::kBytes; \
  extern "C" __device__ const int probe_##TYPE##_staged = octo::cuda::q8::kStaged<octo::GgmlType::k##TYPE>;

#include OCTO_PTX_PROBE_TYPES
