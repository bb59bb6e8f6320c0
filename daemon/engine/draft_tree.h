// DraftTree: the tokens a draft model proposes to follow a sequence's last
// token, for the target to verify in one step (speculative decoding).
//
// The root is the sequence's last token (already decided, not yet fed); each
// node is a proposed token whose parent is the root or an earlier node, so
// node indices are a topological order and a linear draft is the chain
// 0 -> 1 -> 2 .... Nodes are added a level at a time (all of depth d before
// any of depth d + 1), which is what the caches rely on: a draft that has fed
// the nodes of depth < D holds node i at row base + i.
//
// The verification step feeds the root and then every node in index order,
// each row seeing only its ancestors (Mask), so one pass scores every path.
#pragma once

#include <cstdint>
#include <vector>

#include "daemon/sampling/logprobs.h"

namespace octo {

// The most nodes one tree may hold: with its root, a step of
// kMaxTreeAttentionRows (kernels/ops.h) rows.
inline constexpr int kMaxDraftTreeNodes = 63;

struct DraftNode {
  int32_t token = 0;
  int parent = -1;          // -1: the root
  int depth = 1;            // the root's children are at depth 1
  double logprob = 0;       // the draft's log-probability of the path to here
};

class DraftTree {
 public:
  void Clear() { nodes_.clear(); }
  // Adds a child of `parent` (-1: the root); returns its index. The caller
  // keeps size() < kMaxDraftTreeNodes and adds level by level.
  int Add(int parent, int32_t token, double logprob);

  int size() const { return static_cast<int>(nodes_.size()); }
  bool empty() const { return nodes_.empty(); }
  const DraftNode& node(int i) const { return nodes_[static_cast<size_t>(i)]; }
  int depth() const { return nodes_.empty() ? 0 : nodes_.back().depth; }
  // Every node has at most one child.
  bool linear() const;
  // The child of `parent` (-1: the root) proposing `token`, or -1.
  int Child(int parent, int32_t token) const;
  // Nodes of depth d, in index order.
  std::vector<int> Level(int d) const;
  // Node i's ancestors and itself as bits: node j is bit first_bit + j, and
  // with root_bit >= 0 the root is that bit too. first_bit + i < 64.
  uint64_t Mask(int i, int first_bit, int root_bit) const;
  // The tokens of nodes [0, n) in index order.
  std::vector<int32_t> Tokens(int n) const;

 private:
  std::vector<DraftNode> nodes_;
};

// A level of candidates, to grow a tree by: each of `parents` (indices; -1
// the root) offers its `branches` most likely next tokens (`top[i]`, the
// draft's top log-probabilities for parent i, best first); the `width`
// candidates of highest path log-probability join the tree (ties: the
// earlier parent, then the better rank), at most `room` of them. Returns the
// new nodes' indices.
std::vector<int> GrowLevel(DraftTree& tree, const std::vector<int>& parents,
                           const std::vector<std::vector<TokenLogprob>>& top, int branches, int width, int room);

}  // namespace octo
