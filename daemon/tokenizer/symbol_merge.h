// The merge loop that SentencePiece (spm.cc) and byte-level BPE (bpe.cc)
// share. Internal to daemon/tokenizer.
//
// The text is cut into UTF-8 characters ("symbols", a doubly linked list in
// text order). Every adjacent pair that may be joined is queued with its
// score; the best pair is popped and merged, its new neighbours queued, until
// the queue is empty: O(n log n). Only the scoring differs between the two
// tokenizers: SentencePiece takes the highest token score, BPE the lowest
// merge rank; both take the leftmost pair on ties.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <queue>
#include <vector>

#include "absl/strings/string_view.h"
#include "daemon/tokenizer/unicode.h"

namespace octo::tokenizer {

// A run of bytes of the text. A symbol merged into its left neighbour gets
// size 0; the others, in vector order, cover the text.
struct MergeSymbol {
  int64_t prev;  // -1 for the first
  int64_t next;  // -1 for the last
  size_t begin;
  size_t size;
};

// `Score` is what a pair is ranked by; `Before(a, b)` is true when a pair
// scored `a` merges before one scored `b` (std::greater for "highest first",
// std::less for "lowest first"). Equal scores merge the leftmost pair first.
// One merger may be reused across texts (it keeps its buffers); not
// thread-safe.
template <typename Score, typename Before>
class SymbolMerger {
 public:
  // Merges `text` and returns its symbols (valid until the next call).
  // `score(left, right)` returns the score of joining two adjacent symbols
  // (`left.data() + left.size() == right.data()`), or std::nullopt when they
  // may not be joined.
  template <typename ScoreFn>
  const std::vector<MergeSymbol>& Merge(absl::string_view text, ScoreFn score) {
    symbols_.clear();
    queue_ = {};
    for (size_t pos = 0; pos < text.size();) {
      const size_t size = std::min(Utf8LengthFromLead(static_cast<unsigned char>(text[pos])), text.size() - pos);
      const int64_t index = static_cast<int64_t>(symbols_.size());
      symbols_.push_back({index - 1, pos + size == text.size() ? -1 : index + 1, pos, size});
      pos += size;
    }
    for (int64_t i = 1; i < static_cast<int64_t>(symbols_.size()); ++i) TryAddBigram(text, score, i - 1, i);

    while (!queue_.empty()) {
      const Bigram bigram = queue_.top();
      queue_.pop();
      MergeSymbol& left = symbols_[bigram.left];
      MergeSymbol& right = symbols_[bigram.right];
      if (left.size == 0 || right.size == 0 || left.size + right.size != bigram.size) continue;
      // Merge right into left and unlink it.
      left.size += right.size;
      right.size = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = bigram.left;
      TryAddBigram(text, score, left.prev, bigram.left);
      TryAddBigram(text, score, bigram.left, left.next);
    }
    return symbols_;
  }

 private:
  struct Bigram {
    Score score;
    int64_t left;
    int64_t right;
    size_t size;  // bytes of the join when queued; stale once either side changed
  };

  // Orders the queue: the pair that merges first on top, then the leftmost.
  struct BigramLess {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return Before()(b.score, a.score) || (a.score == b.score && a.left > b.left);
    }
  };

  template <typename ScoreFn>
  void TryAddBigram(absl::string_view text, ScoreFn& score, int64_t left, int64_t right) {
    if (left < 0 || right < 0) return;
    const MergeSymbol& l = symbols_[left];
    const MergeSymbol& r = symbols_[right];
    const std::optional<Score> s = score(text.substr(l.begin, l.size), text.substr(r.begin, r.size));
    if (!s.has_value()) return;
    queue_.push({*s, left, right, l.size + r.size});
  }

  std::vector<MergeSymbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue_;
};

}  // namespace octo::tokenizer
