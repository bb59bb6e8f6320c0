#include "daemon/tokenizer/prefix_trie.h"

namespace octo::tokenizer {

void PrefixTrie::Insert(absl::string_view text, int32_t id) {
  size_t node = 0;
  for (char c : text) {
    auto [it, inserted] = children_.try_emplace(Edge(node, static_cast<unsigned char>(c)), token_at_.size());
    if (inserted) token_at_.push_back(-1);
    node = it->second;
  }
  token_at_[node] = id;
}

std::pair<int32_t, size_t> PrefixTrie::LongestPrefix(absl::string_view text) const {
  std::pair<int32_t, size_t> best = {-1, 0};
  size_t node = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    auto it = children_.find(Edge(node, static_cast<unsigned char>(text[i])));
    if (it == children_.end()) break;
    node = it->second;
    if (token_at_[node] >= 0) best = {token_at_[node], i + 1};
  }
  return best;
}

}  // namespace octo::tokenizer
