// The weight loads of cuda::MatMul's decode path, made countable: one kernel
// per type runs exactly what one lane of the decode kernel runs for one unit
// of a weight block (q8::UnpackUnit: a 32-element chunk, or Q4_K/Q5_K's
// chunk pair; kernels/cuda/q8_dot.cuh, the same inline code), with the unit
// a runtime value as in the decode loop. tests/bench/ptx_loads.sh compiles
// this to PTX and counts the global loads of each probe_<TYPE> entry; the
// units per block and the block size come out as the globals
// probe_<TYPE>_units and probe_<TYPE>_bytes. Not part of the build: the script compiles it, with
// OCTO_PTX_PROBE_TYPES naming a file of PROBE(TYPE) lines.
#include <cstdint>

#include "kernels/cuda/q8_dot.cuh"

namespace octo::cuda::q8 {

// Unpacks chunk `chunk` of the block at `block`; every unpacked value goes
// into out, so no load is dead.
template <GgmlType T>
__device__ __forceinline__ void Probe(const uint8_t* block, int unit, int* out) {
  constexpr int kPer = ChunksPerUnit<Q8Weights<T>>();
  Chunk chunks[kPer];
  UnpackUnit<Q8Weights<T>>(block, unit, chunks);
  int sum = 0;
  for (const Chunk& c : chunks) {
    for (int w = 0; w < 8; ++w) sum += c.q[w];
    sum += __float_as_int(c.d[0]) + __float_as_int(c.d[1]) + __float_as_int(c.m[0]) + __float_as_int(c.m[1]);
  }
  out[0] = sum;
}

}  // namespace octo::cuda::q8

#define PROBE(TYPE)                                                                                        \
  extern "C" __global__ void probe_##TYPE(const uint8_t* block, int unit, int* out) {                      \
    octo::cuda::q8::Probe<octo::GgmlType::k##TYPE>(block, unit, out);                                      \
  }                                                                                                        \
  extern "C" __device__ const int probe_##TYPE##_units =                                                  \
      octo::cuda::q8::Q8Weights<octo::GgmlType::k##TYPE>::kChunks /                                        \
      octo::cuda::q8::ChunksPerUnit<octo::cuda::q8::Q8Weights<octo::GgmlType::k##TYPE>>();                \
  extern "C" __device__ const int probe_##TYPE##_bytes = octo::cuda::q8::Q8Weights<octo::GgmlType::k##TYPE>::kBytes;

#include OCTO_PTX_PROBE_TYPES
