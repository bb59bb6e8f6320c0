// The 8-bit activations of cuda::MatMul's decode path, shared by the
// quantizing kernel (kernels/cuda/matmul_decode.cu) and the tests that
// rebuild them on the host.
//
// x (n_tokens, cols) becomes, per 32-element chunk:
//   d = max |x| / 127 (fp32), q = clamp(round(x / d), -127, 127), 0 when d = 0
// with roundf (halves away from zero), as llama.cpp's CUDA quantize_q8_1.
// Layout in the scratch: q (n_tokens, cols) int8 first, then d
// (n_tokens, cols / 32) fp32, each starting on a 256-byte boundary so every
// chunk's 32 quants load as two 16-byte vectors.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/host_device.h"

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

// One element's quant, given its chunk's d (the kernel computes d with a
// warp-wide max).
OCTO_HD inline int8_t ActQ8Quant(float x, float d) {
  if (d == 0.0f) return 0;
  const float q = roundf(x / d);
  return static_cast<int8_t>(fminf(fmaxf(q, -127.0f), 127.0f));  // a NaN x gives -127, not UB
}

}  // namespace octo::cuda
