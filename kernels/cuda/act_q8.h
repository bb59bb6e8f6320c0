// The 8-bit activations of cuda::MatMul's decode path, shared by the
// quantizing kernel (kernels/cuda/matmul_decode.cu) and the tests that
// rebuild them on the host.
//
// x (n_tokens, cols) becomes 8-bit quants q and a float scale d per
// 32-element chunk, x ~ d * q, rounded exactly as the CPU backend (and so
// llama.cpp's CPU build, whose outputs are Octo's reference) encodes the
// activations of the weight's type (kernels/cpu/quantize_activation.h):
//   kPer32   (the Q8_0/Q8_1 rule: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL):
//            amax = max |x| over the chunk; q = rint(x * (127 / amax))
//            (halves to even), 0 when amax = 0; d = amax / 127 rounded to
//            fp16, as the CPU stores it.
//   kPer256  (the Q8_K rule: the K-quants, IQ1-IQ3, IQ4_XS, TQ1_0 and TQ2_0): over 256 elements,
//            max = the x of largest |x| (the first on ties), sign kept;
//            iscale = -127 / max; q = min(127, rint(iscale * x)); d = 1 /
//            iscale in fp32, written to each of the block's 8 chunks.
// llama.cpp's CUDA backend rounds every type per 32 with an fp32 scale;
// following the CPU instead makes the GPU's tokens track the reference as
// closely as the CPU backend's do (the quants are then the same; only the
// float summation order differs).
// Layout in the scratch: q (n_tokens, cols) int8 first, then d
// (n_tokens, cols / 32) fp32, each starting on a 256-byte boundary so every
// chunk's 32 quants load as two 16-byte vectors.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/host_device.h"
#include "storage/ggml_type.h"

namespace octo::cuda {

inline constexpr int kQ8Chunk = 32;  // activation elements per scale

inline constexpr size_t RoundUp256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Bytes of the quants of n_tokens rows of cols (cols a multiple of 32).
inline constexpr size_t ActQ8QuantBytes(int64_t n_tokens, int64_t cols) {
  return RoundUp256(static_cast<size_t>(n_tokens * cols));
}
inline constexpr size_t ActQ8Bytes(int64_t n_tokens, int64_t cols) {
  return ActQ8QuantBytes(n_tokens, cols) + RoundUp256(static_cast<size_t>(n_tokens * (cols / kQ8Chunk)) * 4);
}

enum class ActQ8Rule { kPer32, kPer256 };
inline constexpr int kQ8KBlock = 256;

// The rule for a quantized weight type (the CPU's activation type for it).
inline constexpr ActQ8Rule ActQ8RuleFor(GgmlType type) {
  switch (type) {
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
    case GgmlType::kIQ4_XS:
    case GgmlType::kTQ1_0:
    case GgmlType::kTQ2_0:
    case GgmlType::kIQ2_XXS:
    case GgmlType::kIQ2_XS:
    case GgmlType::kIQ2_S:
    case GgmlType::kIQ3_XXS:
    case GgmlType::kIQ3_S:
    case GgmlType::kIQ1_S:
    case GgmlType::kIQ1_M:
      return ActQ8Rule::kPer256;
    default:
      return ActQ8Rule::kPer32;
  }
}

// Elements per scale-sharing chunk a rule rounds at once (one warp's share
// in act_q8.cuh): 256 under kPer256, 32 under kPer32.
OCTO_HD inline constexpr int ActQ8ChunkOf(ActQ8Rule rule) { return rule == ActQ8Rule::kPer256 ? kQ8KBlock : kQ8Chunk; }

// Where a kernel writes the 8-bit activations of x: the quants and scales in
// the layout above, rounded by `rule`. arrivals: for a producer whose
// chunks are written by several blocks (Attention's heads narrower than a
// chunk: RoundsInSpans below), one counter per chunk of x, zero on entry
// and left zero; null for the others.
struct ActQ8Out {
  ActQ8Rule rule;
  int8_t* q;
  float* d;
  uint32_t* arrivals = nullptr;
};
// q8 seen from element `first` of x on (a multiple of the rule's chunk,
// e.g. a row's first): its quants, scales and chunk counters from there.
OCTO_HD inline ActQ8Out ActQ8From(const ActQ8Out& q8, int64_t first) {
  return ActQ8Out{q8.rule, q8.q + first, q8.d + first / kQ8Chunk,
                  q8.arrivals == nullptr ? nullptr : q8.arrivals + first / ActQ8ChunkOf(q8.rule)};
}
// Whether a producer that writes x in spans of `span` elements, each span
// whole by one block, can round x by `rule` itself: when each chunk is
// whole spans (the block that writes a chunk's last span rounds it, counted
// in ActQ8Out::arrivals) or each span whole chunks (its block rounds them).
inline constexpr bool RoundsInSpans(ActQ8Rule rule, int64_t span) {
  const int64_t chunk = ActQ8ChunkOf(rule);
  return span > 0 && (span % chunk == 0 || chunk % span == 0);
}
// Whether spans of `span` elements share their chunks (need arrivals).
inline constexpr bool SpansShareChunks(ActQ8Rule rule, int64_t span) { return span < ActQ8ChunkOf(rule); }

// That layout from the start of a scratch, for n_tokens rows of cols.
inline ActQ8Out ActQ8At(void* scratch, ActQ8Rule rule, int64_t n_tokens, int64_t cols) {
  auto* q = static_cast<int8_t*>(scratch);
  return ActQ8Out{rule, q, reinterpret_cast<float*>(q + ActQ8QuantBytes(n_tokens, cols))};
}

// One element's quant under kPer32, given its chunk's amax.
OCTO_HD inline int8_t ActQ8QuantPer32(float x, float amax) {
  if (amax == 0.0f) return 0;
  const float q = rintf(x * (127.0f / amax));
  return static_cast<int8_t>(fminf(fmaxf(q, -127.0f), 127.0f));  // a NaN x gives -127, not UB
}

// One element's quant under kPer256, given iscale = -127 / max (0 for an
// all-zero block).
OCTO_HD inline int8_t ActQ8QuantPer256(float x, float iscale) {
  const float q = rintf(iscale * x);
  return static_cast<int8_t>(fminf(fmaxf(q, -128.0f), 127.0f));
}

}  // namespace octo::cuda
