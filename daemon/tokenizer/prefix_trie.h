// A byte trie over token texts, for WordPiece's greedy longest match: the
// longest token a text starts with is found in one pass over the bytes the
// trie holds, however long the tokens are. (Trying every length with a hash
// lookup, as llama.cpp does, costs max_token_len lookups of up to
// max_token_len bytes at each position: cubic for a hostile vocabulary with
// one very long token.)
//
// Immutable after building; the const methods are safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace octo::tokenizer {

class PrefixTrie {
 public:
  PrefixTrie() : token_at_(1, -1) {}

  // Adds `text` (not empty) as token `id` (>= 0); a later text equal to an
  // earlier one replaces its id.
  void Insert(absl::string_view text, int32_t id);

  // The longest inserted text that `text` starts with: {its id, its length in
  // bytes}, or {-1, 0} when none is.
  std::pair<int32_t, size_t> LongestPrefix(absl::string_view text) const;

  bool empty() const { return token_at_.size() == 1; }

 private:
  static uint64_t Edge(size_t node, unsigned char byte) { return (static_cast<uint64_t>(node) << 8) | byte; }

  absl::flat_hash_map<uint64_t, size_t> children_;  // Edge(node, byte) -> child node
  std::vector<int32_t> token_at_;  // by node (0 is the root): the token ending there, or -1
};

}  // namespace octo::tokenizer
