// What the CPU and CUDA attention tests share: the shape of a case, its
// AttentionParams, and random inputs; for tree attention, random draft
// trees and the compacted cache a tree query must match.
#pragma once

#include <algorithm>
#include <bit>
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

// --- Tree attention ----------------------------------------------------------

// A tree step: s's n_tokens rows sit at cache rows tree_base.. (s.first_pos
// is tree_base, as the daemon passes it), each seeing what its mask says.
inline AttentionParams TreeParamsFor(const AttentionShape& s, const uint64_t* tree_mask) {
  AttentionParams p = ParamsFor(s);
  p.tree_mask = tree_mask;
  p.tree_base = s.first_pos;
  return p;
}

// A random tree of draft tokens (ops.h, tree attention). Node i is the
// step's row i, at cache row tree_base + i; node 0 is the root and every
// other node's parent comes before it, so mask[i] holds bit i and the bits
// of all of i's ancestors.
struct DraftTree {
  std::vector<int> parent;     // (n_nodes) -1 for the root
  std::vector<uint64_t> mask;  // (n_nodes)
  int depth = 0;               // nodes on the longest root-to-leaf path
};

// Node i continues node i - 1's path with probability chain_bias (long
// chains), else hangs under a uniformly drawn earlier node (bushy
// branching); no path holds more than max_depth nodes.
inline DraftTree RandomDraftTree(int n_nodes, int max_depth, double chain_bias, uint32_t seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution chain(chain_bias);
  DraftTree tree;
  std::vector<int> depth_of(n_nodes);
  for (int i = 0; i < n_nodes; ++i) {
    int parent = -1;
    if (i > 0) {
      std::vector<int> open;  // the nodes a child may hang under
      for (int j = 0; j < i; ++j) {
        if (depth_of[j] < max_depth) open.push_back(j);
      }
      const bool extend = chain(rng) && depth_of[i - 1] < max_depth;
      parent = extend ? i - 1 : open[std::uniform_int_distribution<size_t>(0, open.size() - 1)(rng)];
    }
    tree.parent.push_back(parent);
    depth_of[i] = parent < 0 ? 1 : depth_of[parent] + 1;
    tree.mask.push_back((parent < 0 ? 0 : tree.mask[parent]) | uint64_t{1} << i);
    tree.depth = std::max(tree.depth, depth_of[i]);
  }
  return tree;
}

// Rows 0..n_rows - 1 of a (n_tokens <= 64) tree step each seeing rows 0..t:
// the causal mask written as a tree mask.
inline std::vector<uint64_t> CausalTreeMask(int n_rows) {
  std::vector<uint64_t> mask(n_rows);
  for (int t = 0; t < n_rows; ++t) mask[t] = t == 63 ? ~uint64_t{0} : (uint64_t{1} << (t + 1)) - 1;
  return mask;
}

// What tree query t of `in` (shape s: its q rows and caches) sees, copied
// into a cache of its own: rows [0, tree_base), then the rows `mask` names in
// ascending order (its logical positions), then extra_rows NaN rows; q is
// query t's row alone. By the tree contract, the causal op's query at
// position tree_base + popcount(mask) - 1 of this copy gives bit for bit
// what the tree op gives query t.
inline AttentionInputs CompactTreeQuery(const AttentionInputs& in, const AttentionShape& s, int tree_base,
                                        uint64_t mask, int t, int extra_rows = 0) {
  const size_t token = static_cast<size_t>(s.n_heads) * s.head_dim;
  const size_t row = static_cast<size_t>(s.n_kv_heads) * s.head_dim;
  AttentionInputs one;
  one.q.assign(in.q.begin() + t * token, in.q.begin() + (t + 1) * token);
  std::vector<int> rows;
  for (int r = 0; r < tree_base; ++r) rows.push_back(r);
  for (int j = 0; j < 64; ++j) {
    if ((mask >> j & 1) != 0) rows.push_back(tree_base + j);
  }
  one.k.assign((rows.size() + extra_rows) * row, kFp16NaN);
  one.v.assign(one.k.size(), kFp16NaN);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(in.k.begin() + rows[i] * row, row, one.k.begin() + i * row);
    std::copy_n(in.v.begin() + rows[i] * row, row, one.v.begin() + i * row);
  }
  return one;
}

// The shape of that causal call: one token at the copy's last position.
inline AttentionShape CompactedShape(const AttentionShape& s, int tree_base, uint64_t mask) {
  return {1, tree_base + std::popcount(mask) - 1, s.n_heads, s.n_kv_heads, s.head_dim};
}

}  // namespace octo::testing
