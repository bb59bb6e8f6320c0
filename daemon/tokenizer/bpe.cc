#include "daemon/tokenizer/bpe.h"

#include <functional>
#include <optional>

#include "daemon/tokenizer/pretokenizer.h"
#include "daemon/tokenizer/symbol_merge.h"
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

// Merges one byte-encoded word by merge rank, lowest first; then each
// symbol becomes its token, or the tokens of its bytes when it is none.
class BpeSession {
 public:
  explicit BpeSession(const Vocab& vocab) : vocab_(vocab) {}

  // Appends the tokens of one byte-encoded word to *out.
  void EncodeWord(absl::string_view word, std::vector<int32_t>* out) {
    if (vocab_.pre.ignore_merges) {
      if (const int32_t id = vocab_.Find(word); id != kNoToken) {
        out->push_back(id);
        return;
      }
    }
    const auto merge_rank = [this](absl::string_view left, absl::string_view right) -> std::optional<int32_t> {
      const int32_t rank = vocab_.MergeRank(left, right, &scratch_);
      if (rank < 0) return std::nullopt;
      return rank;
    };
    for (const MergeSymbol& symbol : merger_.Merge(word, merge_rank)) {
      if (symbol.size == 0) continue;
      const absl::string_view text = word.substr(symbol.begin, symbol.size);
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
  const Vocab& vocab_;
  SymbolMerger<int32_t, std::less<int32_t>> merger_;
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
