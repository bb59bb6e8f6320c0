#include "daemon/tokenizer/bpe.h"

#include <algorithm>
#include <queue>

#include "daemon/tokenizer/pretokenizer.h"
#include "daemon/tokenizer/unicode.h"

namespace octo::tokenizer {
namespace {

bool Gpt2Printable(int byte) { return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE; }

// The code point each byte stands for (see ByteToUnicode).
std::array<uint32_t, 256> ByteCodePoints() {
  std::array<uint32_t, 256> table;
  uint32_t next = 256;
  for (int byte = 0; byte < 256; ++byte) table[byte] = Gpt2Printable(byte) ? byte : next++;
  return table;
}

// Bytes of the word, in merge order; the same layout as the SentencePiece
// session (spm.cc), with merge ranks in place of scores.
struct Symbol {
  int64_t prev;
  int64_t next;
  size_t begin;
  size_t size;  // 0 once merged into the left neighbour
};

struct Bigram {
  int32_t rank;
  int64_t left;
  int64_t right;
  size_t size;  // bytes of the join when queued; stale once either side changed
};

// Orders the queue: lowest rank first, then the leftmost pair.
struct BigramLess {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

class BpeSession {
 public:
  explicit BpeSession(const Vocab& vocab) : vocab_(vocab) {}

  // Appends the tokens of one byte-encoded word to *out.
  void EncodeWord(absl::string_view word, std::vector<int32_t>* out) {
    word_ = word;
    symbols_.clear();
    queue_ = {};
    if (vocab_.pre.ignore_merges) {
      if (const int32_t id = vocab_.Find(word); id != kNoToken) {
        out->push_back(id);
        return;
      }
    }
    for (size_t pos = 0; pos < word.size();) {
      const size_t size = std::min(Utf8LengthFromLead(static_cast<unsigned char>(word[pos])), word.size() - pos);
      const int64_t index = static_cast<int64_t>(symbols_.size());
      symbols_.push_back({index - 1, pos + size == word.size() ? -1 : index + 1, pos, size});
      pos += size;
    }
    for (int64_t i = 1; i < static_cast<int64_t>(symbols_.size()); ++i) TryAddBigram(i - 1, i);

    while (!queue_.empty()) {
      const Bigram bigram = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[bigram.left];
      Symbol& right = symbols_[bigram.right];
      if (left.size == 0 || right.size == 0 || left.size + right.size != bigram.size) continue;
      left.size += right.size;
      right.size = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = bigram.left;
      TryAddBigram(left.prev, bigram.left);
      TryAddBigram(bigram.left, left.next);
    }

    for (const Symbol& symbol : symbols_) {
      if (symbol.size == 0) continue;
      const absl::string_view text = word_.substr(symbol.begin, symbol.size);
      if (const int32_t id = vocab_.Find(text); id != kNoToken) {
        out->push_back(id);
        continue;
      }
      for (char c : text) {
        if (const int32_t id = vocab_.Find(absl::string_view(&c, 1)); id != kNoToken) out->push_back(id);
      }
    }
  }

 private:
  void TryAddBigram(int64_t left, int64_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols_[left];
    const Symbol& r = symbols_[right];
    const int32_t rank = vocab_.MergeRank(word_.substr(l.begin, l.size), word_.substr(r.begin, r.size), &scratch_);
    if (rank < 0) return;
    queue_.push({rank, left, right, l.size + r.size});
  }

  const Vocab& vocab_;
  absl::string_view word_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue_;
  std::string scratch_;
};

}  // namespace

const std::array<std::string, 256>& ByteToUnicode() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> out;
    const std::array<uint32_t, 256> cps = ByteCodePoints();
    for (int byte = 0; byte < 256; ++byte) AppendUtf8(cps[byte], &out[byte]);
    return out;
  }();
  return table;
}

int UnicodeToByte(uint32_t cp) {
  static const std::array<int16_t, 256 + 68> table = [] {
    std::array<int16_t, 256 + 68> out;
    out.fill(-1);
    const std::array<uint32_t, 256> cps = ByteCodePoints();
    for (int byte = 0; byte < 256; ++byte) out[cps[byte]] = static_cast<int16_t>(byte);
    return out;
  }();
  return cp < table.size() ? table[cp] : -1;
}

std::string ByteLevelDecode(absl::string_view token_text) {
  std::string out;
  out.reserve(token_text.size());
  for (size_t pos = 0; pos < token_text.size();) {
    const size_t begin = pos;
    const int byte = UnicodeToByte(DecodeUtf8(token_text, &pos));
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
    } else {
      out.append(token_text.data() + begin, pos - begin);
    }
  }
  return out;
}

void EncodeBpe(const Vocab& vocab, absl::string_view text, std::vector<int32_t>* out) {
  const std::array<std::string, 256>& byte_chars = ByteToUnicode();
  BpeSession session(vocab);
  std::string encoded;
  for (const std::string& word : PreTokenize(vocab.pre, text)) {
    encoded.clear();
    for (char c : word) encoded += byte_chars[static_cast<unsigned char>(c)];
    session.EncodeWord(encoded, out);
  }
}

}  // namespace octo::tokenizer
