#include "daemon/tokenizer/wpm.h"

#include <utility>

#include "daemon/tokenizer/unicode.h"

namespace octo::tokenizer {
namespace {

constexpr absl::string_view kWordStart = "\xE2\x96\x81";  // U+2581 "▁"

// The CJK ideograph blocks BERT's BasicTokenizer splits on (including its
// 0x2B920 start for the block that begins at 0x2B820).
bool IsCjkIdeograph(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// Calls emit(word) for each word of `text` (see wpm.h), in order.
template <typename Emit>
void ForEachWord(absl::string_view text, Emit&& emit) {
  std::string word;
  auto finish = [&] {
    if (!word.empty()) emit(word);
    word.clear();
  };
  for (size_t pos = 0; pos < text.size();) {
    const uint32_t cp = NfdBase(DecodeUtf8(text, &pos));
    const uint8_t classes = UnicodeClassesOf(cp);
    if (classes & kWhitespace) {
      finish();
      continue;
    }
    if (cp == 0 || cp == kReplacementCharacter || (classes & kOther)) continue;
    const bool alone = (classes & kPunctuation) || (cp < 0x7F && (classes & kSymbol)) || IsCjkIdeograph(cp);
    if (alone) finish();
    AppendUtf8(ToLower(cp), &word);
    if (alone) finish();
  }
  finish();
}

// Appends the tokens of "▁" + word, or the unknown token when some part of
// it has none.
void EncodeWord(const Vocab& vocab, absl::string_view marked_word, std::vector<int32_t>* out) {
  const size_t start = out->size();
  for (size_t at = 0; at < marked_word.size();) {
    const auto [id, length] = vocab.prefix_trie.LongestPrefix(marked_word.substr(at));
    if (id < 0) {
      out->resize(start);
      out->push_back(vocab.unk);
      return;
    }
    out->push_back(id);
    at += length;
  }
}

}  // namespace

std::vector<std::string> WpmWords(absl::string_view text) {
  std::vector<std::string> words;
  ForEachWord(text, [&words](const std::string& word) { words.push_back(word); });
  return words;
}

void EncodeWpm(const Vocab& vocab, absl::string_view text, std::vector<int32_t>* out) {
  std::string marked(kWordStart);
  ForEachWord(text, [&](const std::string& word) {
    marked.resize(kWordStart.size());
    marked += word;
    EncodeWord(vocab, marked, out);
  });
}

}  // namespace octo::tokenizer
