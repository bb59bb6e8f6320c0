#include "daemon/tokenizer/unicode.h"

#include <algorithm>
#include <iterator>

namespace octo::tokenizer {
namespace {

// Entry types of the generated mapping tables.
struct NfdRange {
  uint32_t first;
  uint16_t count;  // first .. first + count - 1 share `base`
  uint32_t base;
};
struct CaseRun {
  uint32_t first, last;
  int32_t delta;   // lowercase = cp + delta
  uint8_t stride;  // 1, or 2 for alternating upper/lower pairs
};

#include "daemon/tokenizer/unicode_table.inc"

bool IsContinuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

uint8_t UnicodeClassesOf(uint32_t cp) {
  if (cp > kMaxCodePoint) return 0;
  // The last entry whose first code point is <= cp.
  const uint32_t key = (cp << 8) | 0xFF;
  const uint32_t* it = std::upper_bound(std::begin(kUnicodeClassRanges), std::end(kUnicodeClassRanges), key);
  return static_cast<uint8_t>(*(it - 1) & 0xFF);
}

uint32_t NfdBase(uint32_t cp) {
  const NfdRange* it = std::upper_bound(std::begin(kNfdRanges), std::end(kNfdRanges), cp,
                                        [](uint32_t c, const NfdRange& range) { return c < range.first; });
  if (it == std::begin(kNfdRanges)) return cp;
  const NfdRange& range = *(it - 1);
  return cp - range.first < range.count ? range.base : cp;
}

uint32_t ToLower(uint32_t cp) {
  const CaseRun* it = std::upper_bound(std::begin(kLowercaseRuns), std::end(kLowercaseRuns), cp,
                                       [](uint32_t c, const CaseRun& run) { return c < run.first; });
  if (it == std::begin(kLowercaseRuns)) return cp;
  const CaseRun& run = *(it - 1);
  if (cp > run.last || (cp - run.first) % run.stride != 0) return cp;
  return static_cast<uint32_t>(static_cast<int32_t>(cp) + run.delta);
}

uint32_t DecodeUtf8(absl::string_view text, size_t* pos) {
  const size_t at = *pos;
  const unsigned char lead = static_cast<unsigned char>(text[at]);
  if (lead < 0x80) {
    *pos = at + 1;
    return lead;
  }
  size_t length = 0;
  uint32_t cp = 0;
  uint32_t min_value = 0;  // smallest value this length may encode (no overlongs)
  if ((lead & 0xE0) == 0xC0) {
    length = 2, cp = lead & 0x1F, min_value = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, cp = lead & 0x0F, min_value = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, cp = lead & 0x07, min_value = 0x10000;
  }
  bool ok = length != 0 && at + length <= text.size();
  for (size_t i = 1; ok && i < length; ++i) {
    const unsigned char byte = static_cast<unsigned char>(text[at + i]);
    ok = IsContinuation(byte);
    cp = (cp << 6) | (byte & 0x3F);
  }
  ok = ok && cp >= min_value && cp <= kMaxCodePoint && !(cp >= 0xD800 && cp <= 0xDFFF);
  if (!ok) {
    *pos = at + 1;
    return kReplacementCharacter;
  }
  *pos = at + length;
  return cp;
}

std::vector<uint32_t> DecodeUtf8All(absl::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) out.push_back(DecodeUtf8(text, &pos));
  return out;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacementCharacter;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t Utf8LengthFromLead(unsigned char lead) {
  static constexpr uint8_t kByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[lead >> 4];
}

}  // namespace octo::tokenizer
