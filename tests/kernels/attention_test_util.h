// What the CPU and CUDA attention tests share: the shape of a case, its
// AttentionParams, and random inputs.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/half.h"
#include "kernels/ops.h"

namespace octo::testing {

inline constexpr uint16_t kFp16NaN = 0x7e00;

struct AttentionShape {
  int n_tokens;
  int first_pos;
  int n_heads;
  int n_kv_heads;
  int head_dim;
};

inline std::string Describe(const AttentionShape& s) {
  return absl::StrFormat("n_tokens=%d first_pos=%d n_heads=%d n_kv_heads=%d head_dim=%d", s.n_tokens,
                         s.first_pos, s.n_heads, s.n_kv_heads, s.head_dim);
}

// scale = 1 / sqrt(head_dim).
inline AttentionParams ParamsFor(const AttentionShape& s) {
  AttentionParams p;
  p.n_tokens = s.n_tokens;
  p.first_pos = s.first_pos;
  p.n_heads = s.n_heads;
  p.n_kv_heads = s.n_kv_heads;
  p.head_dim = s.head_dim;
  p.scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  return p;
}

// q (n_tokens, n_heads * head_dim) in [-3, 3], so the scores spread over a
// few units and the softmax is not flat; k and v caches (first_pos +
// n_tokens + extra_rows, n_kv_heads * head_dim) in [-1, 1] as fp16, the
// extra rows (which no query may read) NaN.
struct AttentionInputs {
  std::vector<float> q;
  std::vector<uint16_t> k;
  std::vector<uint16_t> v;
};

inline AttentionInputs RandomAttentionInputs(const AttentionShape& s, uint32_t seed, int extra_rows = 0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> q_dist(-3.0f, 3.0f);
  std::uniform_real_distribution<float> kv_dist(-1.0f, 1.0f);
  AttentionInputs in;
  in.q.resize(static_cast<size_t>(s.n_tokens) * s.n_heads * s.head_dim);
  for (float& f : in.q) f = q_dist(rng);
  const size_t row = static_cast<size_t>(s.n_kv_heads) * s.head_dim;
  const size_t visible = static_cast<size_t>(s.first_pos + s.n_tokens) * row;
  in.k.assign(visible + extra_rows * row, kFp16NaN);
  in.v.assign(in.k.size(), kFp16NaN);
  for (size_t i = 0; i < visible; ++i) in.k[i] = Fp32ToFp16(kv_dist(rng));
  for (size_t i = 0; i < visible; ++i) in.v[i] = Fp32ToFp16(kv_dist(rng));
  return in;
}

}  // namespace octo::testing
