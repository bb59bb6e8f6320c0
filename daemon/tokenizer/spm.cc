#include "daemon/tokenizer/spm.h"

#include <algorithm>
#include <queue>

#include "daemon/tokenizer/unicode.h"

namespace octo::tokenizer {
namespace {

// A run of bytes of the text; symbols form a doubly linked list in text
// order. A symbol merged into its left neighbour gets size 0.
struct Symbol {
  int64_t prev;
  int64_t next;
  size_t begin;
  size_t size;
};

struct Bigram {
  float score;
  int64_t left;
  int64_t right;
  size_t size;  // bytes of the join when queued; stale once either side changed
};

// Orders the queue: highest score first, then the leftmost pair.
struct BigramLess {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmSession {
 public:
  SpmSession(const Vocab& vocab, absl::string_view text) : vocab_(vocab), text_(text) {}

  void Encode(std::vector<int32_t>* out) {
    for (size_t pos = 0; pos < text_.size();) {
      const size_t size =
          std::min(Utf8LengthFromLead(static_cast<unsigned char>(text_[pos])), text_.size() - pos);
      const int64_t index = static_cast<int64_t>(symbols_.size());
      symbols_.push_back({index - 1, pos + size == text_.size() ? -1 : index + 1, pos, size});
      pos += size;
    }
    for (int64_t i = 1; i < static_cast<int64_t>(symbols_.size()); ++i) TryAddBigram(i - 1, i);

    while (!queue_.empty()) {
      const Bigram bigram = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[bigram.left];
      Symbol& right = symbols_[bigram.right];
      if (left.size == 0 || right.size == 0 || left.size + right.size != bigram.size) continue;
      // Merge right into left and unlink it.
      left.size += right.size;
      right.size = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = bigram.left;
      TryAddBigram(left.prev, bigram.left);
      TryAddBigram(bigram.left, left.next);
    }

    for (int64_t i = symbols_.empty() ? -1 : 0; i != -1; i = symbols_[i].next) Emit(symbols_[i], out);
  }

 private:
  absl::string_view Text(const Symbol& s, size_t size) const { return text_.substr(s.begin, size); }

  void TryAddBigram(int64_t left, int64_t right) {
    if (left < 0 || right < 0) return;
    const size_t size = symbols_[left].size + symbols_[right].size;
    const int32_t id = vocab_.Find(Text(symbols_[left], size));
    if (id == kNoToken) return;
    queue_.push({vocab_.scores[id], left, right, size});
  }

  void Emit(const Symbol& symbol, std::vector<int32_t>* out) const {
    const absl::string_view text = Text(symbol, symbol.size);
    if (const int32_t id = vocab_.Find(text); id != kNoToken) {
      out->push_back(id);
      return;
    }
    // Only single characters can be left without a token: merges make tokens.
    bool all_bytes = true;
    for (char c : text) all_bytes = all_bytes && vocab_.byte_tokens[static_cast<unsigned char>(c)] != kNoToken;
    if (all_bytes) {
      for (char c : text) out->push_back(vocab_.byte_tokens[static_cast<unsigned char>(c)]);
    } else if (vocab_.unk != kNoToken) {
      out->push_back(vocab_.unk);
    }
  }

  const Vocab& vocab_;
  absl::string_view text_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue_;
};

}  // namespace

void EncodeSpm(const Vocab& vocab, absl::string_view text, std::vector<int32_t>* out) {
  SpmSession(vocab, text).Encode(out);
}

}  // namespace octo::tokenizer
