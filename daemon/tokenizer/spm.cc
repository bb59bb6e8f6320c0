#include "daemon/tokenizer/spm.h"

#include <functional>
#include <optional>

#include "daemon/tokenizer/symbol_merge.h"

namespace octo::tokenizer {
namespace {

// Merges the text by the score of the joined token, highest first; then each
// symbol becomes its token, or its byte tokens, or the unknown token.
class SpmSession {
 public:
  explicit SpmSession(const Vocab& vocab) : vocab_(vocab) {}

  void Encode(absl::string_view text, std::vector<int32_t>* out) {
    // The two symbols are adjacent in `text`: their join is one view.
    const auto score = [this](absl::string_view left, absl::string_view right) -> std::optional<float> {
      const int32_t id = vocab_.Find(absl::string_view(left.data(), left.size() + right.size()));
      if (id == kNoToken) return std::nullopt;
      return vocab_.scores[id];
    };
    for (const MergeSymbol& symbol : merger_.Merge(text, score)) {
      if (symbol.size != 0) Emit(text.substr(symbol.begin, symbol.size), out);
    }
  }

 private:
  void Emit(absl::string_view text, std::vector<int32_t>* out) const {
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
  SymbolMerger<float, std::greater<float>> merger_;
};

}  // namespace

void EncodeSpm(const Vocab& vocab, absl::string_view text, std::vector<int32_t>* out) {
  SpmSession(vocab).Encode(text, out);
}

}  // namespace octo::tokenizer
