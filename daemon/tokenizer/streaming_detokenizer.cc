#include "daemon/tokenizer/streaming_detokenizer.h"

#include "daemon/tokenizer/unicode.h"

namespace octo {
namespace {

using tokenizer::AppendUtf8;
using tokenizer::DecodeUtf8;

// True when text[pos..] is too short to be a whole character but every byte
// of it fits a well-formed one, so more bytes may complete it.
bool IsUnfinishedCharacter(absl::string_view text, size_t pos) {
  const unsigned char lead = static_cast<unsigned char>(text[pos]);
  size_t length = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) lo = 0xA0;  // no overlong forms
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) lo = 0x90;  // no overlong forms
    if (lead == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return false;
  }
  const size_t available = text.size() - pos;
  if (available >= length) return false;
  for (size_t i = 1; i < available; ++i) {
    const unsigned char byte = static_cast<unsigned char>(text[pos + i]);
    const bool fits = i == 1 ? (byte >= lo && byte <= hi) : (byte & 0xC0) == 0x80;
    if (!fits) return false;
  }
  return true;
}

}  // namespace

std::string StreamingDetokenizer::Push(int32_t id) {
  pending_ += tokenizer_.Piece(id, render_special_);
  std::string out;
  size_t pos = 0;
  while (pos < pending_.size() && !IsUnfinishedCharacter(pending_, pos)) {
    const size_t begin = pos;
    const uint32_t cp = DecodeUtf8(pending_, &pos);
    if (cp == tokenizer::kReplacementCharacter && pos == begin + 1) {
      AppendUtf8(cp, &out);
    } else {
      out.append(pending_, begin, pos - begin);  // well formed: copy as is
    }
  }
  pending_.erase(0, pos);
  return out;
}

std::string StreamingDetokenizer::Flush() {
  std::string out;
  for (size_t i = 0; i < pending_.size(); ++i) AppendUtf8(tokenizer::kReplacementCharacter, &out);
  pending_.clear();
  return out;
}

}  // namespace octo
