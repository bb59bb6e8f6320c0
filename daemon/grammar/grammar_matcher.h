// GrammarMatcher: how far a generation has come through a Grammar, advanced
// one token's bytes at a time, and which tokens of the vocabulary may come
// next (the mask the sampler applies).
//
// The state is every way the grammar can continue: a set of stacks of
// positions (rule, alternative, element), the innermost last, each with a
// character set on top, plus the bytes of a UTF-8 character a token began
// and the next one finishes. An empty stack is a whole match: the
// generation may end there. Each Accept keeps the state it replaced, so a
// speculative step's rejected tokens roll back exactly.
//
// Not thread-safe: one matcher per sequence. The Grammar and the TokenTrie
// are shared, read-only.
#pragma once

#include <compare>
#include <cstdint>
#include <deque>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "daemon/grammar/grammar.h"

namespace octo {

// The vocabulary as a trie of token bytes, built once per model: a mask
// walks it once, dropping every token under a prefix the grammar refuses.
class TokenTrie {
 public:
  // bytes[id]: what token `id` decodes to; empty ones (special tokens, which
  // a grammar never allows) are left out.
  explicit TokenTrie(const std::vector<std::string>& bytes);

  struct Node {
    std::vector<std::pair<uint8_t, uint32_t>> children;  // by byte, ascending
    std::vector<int32_t> tokens;                          // tokens whose bytes end here
  };
  const Node& node(uint32_t i) const { return nodes_[i]; }
  size_t vocab_size() const { return vocab_size_; }
  size_t nodes() const { return nodes_.size(); }

 private:
  std::vector<Node> nodes_;  // [0] is the root
  size_t vocab_size_ = 0;
};

class MaskCache;

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // Feeds one token's bytes (possibly part of a character); false, with
  // nothing changed, when the grammar refuses them.
  bool Accept(absl::string_view bytes);
  // Whether Accept would take `bytes`; the state stays as it is.
  bool Allows(absl::string_view bytes) const;
  // The text so far is a whole match: the generation may end here.
  bool CanEnd() const;
  // Undoes the last `n` Accept calls (at most the last 64); INVALID_ARGUMENT
  // past what is kept.
  absl::Status Rollback(int n);
  int accepted() const { return accepted_; }  // tokens since the start, less those rolled back

  // allowed[id] = 1 for each token of `trie` Accept would take, else 0.
  // `shared` (may be null): masks other matchers of the same grammar over
  // the same trie computed, and this one's for them.
  void FillMask(const TokenTrie& trie, std::vector<uint8_t>& allowed, MaskCache* shared = nullptr) const;

  struct Position {
    uint32_t rule = 0, alternative = 0, element = 0;
    auto operator<=>(const Position&) const = default;
  };
  using Stack = std::vector<Position>;
  struct State {
    std::vector<Stack> stacks;  // sorted, no repeats
    uint32_t code_point = 0;    // the character begun so far
    uint8_t pending = 0;        // its continuation bytes still to come
    uint8_t length = 0;         // its bytes in all
    bool operator==(const State&) const = default;
  };

 private:
  // The state after `bytes`, or none when the grammar refuses them.
  std::optional<State> After(absl::string_view bytes) const;
  // One byte into `state`; false when no stack can continue with it.
  bool Step(State& state, uint8_t byte) const;
  struct WalkMemo;
  void Walk(const TokenTrie& trie, uint32_t node, uint32_t state, WalkMemo& memo, std::vector<uint8_t>& allowed) const;

  std::shared_ptr<const Grammar> grammar_;
  std::deque<State> history_;  // back(): the state now; the ones before it, to roll back to
  int accepted_ = 0;
  // Masks of the states last masked (a string's characters, a repeated
  // element: generation comes back to the same state often), newest last.
  struct CachedMask {
    State state;
    const TokenTrie* trie = nullptr;
    std::vector<uint8_t> allowed;
  };
  mutable std::deque<CachedMask> masks_;
};

// Masks shared by every matcher of one vocabulary (one per model): the
// first reply that reaches a state of a grammar walks the trie, the later
// ones (other requests with the same schema or JSON mode) look it up. At
// most `capacity` masks, the least recently used out first. Thread-safe.
class MaskCache {
 public:
  explicit MaskCache(size_t capacity) : capacity_(capacity) {}

  // The mask of `grammar`'s `state`, or null.
  std::shared_ptr<const std::vector<uint8_t>> Find(const Grammar& grammar, const GrammarMatcher::State& state);
  void Add(const Grammar& grammar, const GrammarMatcher::State& state, std::vector<uint8_t> mask);
  size_t hits() const;
  // A state as bytes: equal states, equal keys.
  static std::string StateKey(const GrammarMatcher::State& state);

 private:
  static std::string Key(const Grammar& grammar, const GrammarMatcher::State& state);

  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const std::vector<uint8_t>>>> entries_;  // newest first
  std::unordered_map<std::string, decltype(entries_)::iterator> index_;
  size_t hits_ = 0;
};

}  // namespace octo
