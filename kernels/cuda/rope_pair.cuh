// One RoPE pair's rotation, as the CPU computes it: rope.cu's launches and
// the q/k/v decode launch's head tails (matmul_decode.cu, fused.h's
// MatMulGroupRopeAppend) turn heads with it, so either gives the same bits.
#pragma once

#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/ops.h"

namespace octo::cuda {

// theta_scale, powf(freq_base, -2 / rope_dim), with the CPU's expression (std::pow
// on floats is powf), on the host: the device's powf may differ in the last bit.
inline float RopeThetaScale(const RopeParams& p) {
  return std::pow(p.freq_base, -2.0f / static_cast<float>(p.rope_dim));
}

// Rotates pair i of one head (at `head`) of a token at position pos: its
// angle as the CPU computes it (pos, times theta_scale once per pair before
// it, in float; divided by the pair's frequency factor), its cos and sin.
// Pair i is (x[2i], x[2i+1]) in normal mode, (x[i], x[i + n_pairs]) in neox.
__device__ __forceinline__ void RotatePair(float* head, int i, float pos, const RopeParams& p, float theta_scale) {
  const int n_pairs = p.rope_dim / 2;
  // theta_i = pos * theta_scale^i, multiplied up pair by pair in float as
  // the CPU (and ggml) does: i roundings, the same bits.
  float theta = pos;
  for (int m = 0; m < i; ++m) theta *= theta_scale;
  const float angle = p.freq_factors != nullptr ? theta / p.freq_factors[i] : theta;
  const float cos_theta = cosf(angle);
  const float sin_theta = sinf(angle);
  float* first = head + i * (p.neox ? 1 : 2);
  float* second = first + (p.neox ? n_pairs : 1);
  const float x0 = *first;
  const float x1 = *second;
  *first = x0 * cos_theta - x1 * sin_theta;
  *second = x0 * sin_theta + x1 * cos_theta;
}

}  // namespace octo::cuda
