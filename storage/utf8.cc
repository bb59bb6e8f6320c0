#include "storage/utf8.h"

#include <cstdint>

namespace octo {

size_t Utf8SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC0) return 0;  // continuation byte
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF8) return 4;
  return 0;
}

bool IsValidUtf8(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t length = Utf8SequenceLength(lead);
    if (length == 0 || i + length > text.size()) return false;
    if (length == 1) {
      ++i;
      continue;
    }
    uint32_t code_point = lead & (0x7F >> length);
    for (size_t k = 1; k < length; ++k) {
      const auto byte = static_cast<unsigned char>(text[i + k]);
      if (!IsUtf8Continuation(byte)) return false;
      code_point = (code_point << 6) | (byte & 0x3F);
    }
    // The smallest code point each length may encode; smaller is overlong.
    static constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (code_point < kMinForLength[length]) return false;
    if (code_point > 0x10FFFF) return false;
    if (code_point >= 0xD800 && code_point <= 0xDFFF) return false;  // surrogates
    i += length;
  }
  return true;
}

size_t IncompleteUtf8Tail(absl::string_view text) {
  // A character is at most 4 bytes, so an unfinished one starts in the last 3.
  const size_t size = text.size();
  for (size_t back = 1; back <= 3 && back <= size; ++back) {
    const auto byte = static_cast<unsigned char>(text[size - back]);
    if (IsUtf8Continuation(byte)) continue;
    const size_t length = Utf8SequenceLength(byte);
    return length > back ? back : 0;
  }
  return 0;
}

size_t Utf8CutBefore(absl::string_view text, size_t pos) {
  if (pos >= text.size()) return text.size();
  size_t lead = pos;
  for (int steps = 0; steps < 3 && lead > 0 && IsUtf8Continuation(static_cast<unsigned char>(text[lead]));
       ++steps) {
    --lead;
  }
  if (lead == pos) return pos;
  // `pos` is inside the character at `lead` only if that character reaches it.
  const size_t length = Utf8SequenceLength(static_cast<unsigned char>(text[lead]));
  return length > pos - lead ? lead : pos;
}

std::string ReplaceInvalidUtf8(absl::string_view text) {
  if (IsValidUtf8(text)) return std::string(text);
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t n = Utf8SequenceLength(static_cast<unsigned char>(text[i]));
    if (n > 0 && i + n <= text.size() && IsValidUtf8(text.substr(i, n))) {
      out.append(text.data() + i, n);
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD
      ++i;
    }
  }
  return out;
}

}  // namespace octo
