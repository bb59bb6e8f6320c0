// What the CPU and CUDA tests of attention over a quantized KV cache share:
// random caches encoded by cpu::KvAppend, their decoded values, a double
// reference over them, and a tree query's compacted cache.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/half.h"
#include "kernels/ops.h"
#include "tests/kernels/attention_test_util.h"

namespace octo::testing {

// Every pair of cache types with at least one quantized side.
inline std::vector<KvCacheTypes> QuantizedTypePairs() {
  const GgmlType all[] = {GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1};
  std::vector<KvCacheTypes> pairs;
  for (GgmlType k : all) {
    for (GgmlType v : all) {
      if (k != GgmlType::kF16 || v != GgmlType::kF16) pairs.push_back({k, v});
    }
  }
  return pairs;
}

inline std::string Describe(const KvCacheTypes& t) {
  return absl::StrFormat("k=%s v=%s", KvCacheTypeName(t.k), KvCacheTypeName(t.v));
}

// One case's inputs: q as RandomAttentionInputs makes it, the keys and
// values before encoding (in [-1, 1]), the caches KvAppend encoded from them
// (the `extra_rows` after the visible ones filled with 0x7E bytes, whose
// scales and fp16 values are NaN: reading one shows), and what the visible
// rows decode to.
struct QuantizedInputs {
  KvCacheTypes types;
  std::vector<float> q;
  std::vector<float> k_values, v_values;    // (visible rows, kv_dim)
  std::vector<uint8_t> k, v;                // (visible + extra rows) encoded
  std::vector<float> k_decoded, v_decoded;  // (visible rows, kv_dim)
  size_t k_row_bytes = 0, v_row_bytes = 0;
};

inline std::vector<float> Decode(GgmlType type, const std::vector<uint8_t>& cache, int rows, int kv_dim) {
  std::vector<float> out(static_cast<size_t>(rows) * kv_dim);
  const absl::Status status = cpu::DequantizeRows(WeightMatrix{type, cache.data(), rows, kv_dim}, 0, rows, out.data());
  if (!status.ok()) out.assign(out.size(), NAN);
  return out;
}

inline QuantizedInputs RandomQuantizedInputs(const AttentionShape& s, KvCacheTypes types, uint32_t seed,
                                             int extra_rows = 0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> q_dist(-3.0f, 3.0f);
  std::uniform_real_distribution<float> kv_dist(-1.0f, 1.0f);
  QuantizedInputs in;
  in.types = types;
  in.q.resize(static_cast<size_t>(s.n_tokens) * s.n_heads * s.head_dim);
  for (float& f : in.q) f = q_dist(rng);
  const int kv_dim = s.n_kv_heads * s.head_dim;
  const int visible = s.first_pos + s.n_tokens;
  in.k_values.resize(static_cast<size_t>(visible) * kv_dim);
  in.v_values.resize(in.k_values.size());
  for (float& f : in.k_values) f = kv_dist(rng);
  for (float& f : in.v_values) f = kv_dist(rng);
  in.k_row_bytes = RowBytes(types.k, kv_dim);
  in.v_row_bytes = RowBytes(types.v, kv_dim);
  in.k.assign((visible + extra_rows) * in.k_row_bytes, 0x7E);
  in.v.assign((visible + extra_rows) * in.v_row_bytes, 0x7E);
  const absl::Status status =
      cpu::KvAppend(in.k_values.data(), in.v_values.data(), visible, kv_dim, in.k.data(), in.v.data(), 0, types);
  if (!status.ok()) in.q.assign(in.q.size(), NAN);
  in.k_decoded = Decode(types.k, in.k, visible, kv_dim);
  in.v_decoded = Decode(types.v, in.v, visible, kv_dim);
  return in;
}

inline AttentionParams QuantizedParamsFor(const AttentionShape& s, KvCacheTypes types) {
  AttentionParams p = ParamsFor(s);
  p.types = types;
  return p;
}

// The op's contract (ops.h) in double over the given keys and values
// (rows, kv_dim): q rounded to fp16 when round_q, the weights rounded to
// fp16 when round_weights, everything else exact up to double rounding.
// With round_weights, a weight the op computes in float may round to the
// fp16 on the other side of a rounding midpoint; `flip` (when set) gets,
// per output, what such weights could move it: for every weight within
// 1e-6 (relative, far above the float softmax's error) of a midpoint, the
// gap between its two fp16 neighbours times |v|.
inline std::vector<double> AttentionReference(const std::vector<float>& q, const std::vector<float>& k,
                                              const std::vector<float>& v, const AttentionShape& s, bool round_q,
                                              bool round_weights, std::vector<double>* flip = nullptr) {
  const int group = s.n_heads / s.n_kv_heads;
  const double scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  std::vector<double> out(q.size());
  if (flip != nullptr) flip->assign(q.size(), 0.0);
  for (int t = 0; t < s.n_tokens; ++t) {
    for (int h = 0; h < s.n_heads; ++h) {
      const size_t q_at = (static_cast<size_t>(t) * s.n_heads + h) * s.head_dim;
      const int n_ctx = s.first_pos + t + 1;
      auto kv_at = [&](int pos) { return (static_cast<size_t>(pos) * s.n_kv_heads + h / group) * s.head_dim; };
      std::vector<double> att(n_ctx);
      for (int pos = 0; pos < n_ctx; ++pos) {
        double dot = 0;
        for (int d = 0; d < s.head_dim; ++d) {
          const float qd = round_q ? Fp16ToFp32(Fp32ToFp16(q[q_at + d])) : q[q_at + d];
          dot += static_cast<double>(qd) * k[kv_at(pos) + d];
        }
        att[pos] = dot * static_cast<float>(scale);
      }
      const double max = *std::max_element(att.begin(), att.end());
      double sum = 0;
      for (double& a : att) sum += a = std::exp(a - max);
      for (int d = 0; d < s.head_dim; ++d) {
        double o = 0;
        for (int pos = 0; pos < n_ctx; ++pos) {
          const double w = att[pos] / sum;
          o += (round_weights ? Fp16ToFp32(Fp32ToFp16(static_cast<float>(w))) : w) * v[kv_at(pos) + d];
          if (round_weights && flip != nullptr) {
            const double lo = Fp16ToFp32(Fp32ToFp16(static_cast<float>(w * (1 - 1e-6))));
            const double hi = Fp16ToFp32(Fp32ToFp16(static_cast<float>(w * (1 + 1e-6))));
            (*flip)[q_at + d] += (hi - lo) * std::fabs(v[kv_at(pos) + d]);
          }
        }
        out[q_at + d] = o;
      }
    }
  }
  return out;
}

// The contract over the decoded caches: what the kernels must compute.
inline std::vector<double> DecodedReference(const QuantizedInputs& in, const AttentionShape& s,
                                            std::vector<double>* flip = nullptr) {
  return AttentionReference(in.q, in.k_decoded, in.v_decoded, s, /*round_q=*/true,
                            /*round_weights=*/in.types.v == GgmlType::kF16, flip);
}

// Query t of a tree step alone, on a cache holding the rows its mask names
// contiguously (as CompactTreeQuery, on encoded rows).
inline QuantizedInputs CompactQuantizedTreeQuery(const QuantizedInputs& in, const AttentionShape& s, int tree_base,
                                                 uint64_t mask, int t) {
  const size_t token = static_cast<size_t>(s.n_heads) * s.head_dim;
  QuantizedInputs one;
  one.types = in.types;
  one.k_row_bytes = in.k_row_bytes;
  one.v_row_bytes = in.v_row_bytes;
  one.q.assign(in.q.begin() + t * token, in.q.begin() + (t + 1) * token);
  std::vector<int> rows;
  for (int r = 0; r < tree_base; ++r) rows.push_back(r);
  for (int j = 0; j < 64; ++j) {
    if ((mask >> j & 1) != 0) rows.push_back(tree_base + j);
  }
  for (int r : rows) {
    one.k.insert(one.k.end(), in.k.begin() + r * in.k_row_bytes, in.k.begin() + (r + 1) * in.k_row_bytes);
    one.v.insert(one.v.end(), in.v.begin() + r * in.v_row_bytes, in.v.begin() + (r + 1) * in.v_row_bytes);
  }
  return one;
}

}  // namespace octo::testing
