#include "daemon/engine/draft_tree.h"

#include <algorithm>

namespace octo {

int DraftTree::Add(int parent, int32_t token, double logprob) {
  const int depth = parent < 0 ? 1 : nodes_[static_cast<size_t>(parent)].depth + 1;
  nodes_.push_back(DraftNode{.token = token, .parent = parent, .depth = depth, .logprob = logprob});
  return size() - 1;
}

bool DraftTree::linear() const {
  for (int i = 0; i < size(); ++i) {
    if (nodes_[static_cast<size_t>(i)].parent != i - 1) return false;
  }
  return true;
}

int DraftTree::Child(int parent, int32_t token) const {
  for (int i = 0; i < size(); ++i) {
    if (nodes_[static_cast<size_t>(i)].parent == parent && nodes_[static_cast<size_t>(i)].token == token) return i;
  }
  return -1;
}

std::vector<int> DraftTree::Level(int d) const {
  std::vector<int> level;
  for (int i = 0; i < size(); ++i) {
    if (nodes_[static_cast<size_t>(i)].depth == d) level.push_back(i);
  }
  return level;
}

uint64_t DraftTree::Mask(int i, int first_bit, int root_bit) const {
  uint64_t mask = root_bit >= 0 ? uint64_t{1} << root_bit : 0;
  for (int j = i; j >= 0; j = nodes_[static_cast<size_t>(j)].parent) mask |= uint64_t{1} << (first_bit + j);
  return mask;
}

std::vector<int32_t> DraftTree::Tokens(int n) const {
  std::vector<int32_t> tokens;
  for (int i = 0; i < std::min(n, size()); ++i) tokens.push_back(nodes_[static_cast<size_t>(i)].token);
  return tokens;
}

std::vector<int> GrowLevel(DraftTree& tree, const std::vector<int>& parents,
                           const std::vector<std::vector<TokenLogprob>>& top, int branches, int width, int room) {
  struct Candidate {
    int parent_index;  // into parents
    int rank;
    double logprob;    // of the whole path
  };
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < parents.size(); ++i) {
    const double base = parents[i] < 0 ? 0.0 : tree.node(parents[i]).logprob;
    for (int r = 0; r < std::min<int>(branches, static_cast<int>(top[i].size())); ++r) {
      candidates.push_back({static_cast<int>(i), r, base + top[i][static_cast<size_t>(r)].logprob});
    }
  }
  // Best paths first; equal ones in parent, then rank order (a total order,
  // so every machine grows the same tree).
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.logprob > b.logprob; });
  candidates.resize(std::min<size_t>(candidates.size(), static_cast<size_t>(std::max(0, std::min(width, room)))));
  // Added in parent order, so a level's nodes sit together by parent.
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.parent_index != b.parent_index ? a.parent_index < b.parent_index : a.rank < b.rank;
  });
  std::vector<int> added;
  for (const Candidate& c : candidates) {
    const TokenLogprob& t = top[static_cast<size_t>(c.parent_index)][static_cast<size_t>(c.rank)];
    added.push_back(tree.Add(parents[static_cast<size_t>(c.parent_index)], t.id, c.logprob));
  }
  return added;
}

}  // namespace octo
