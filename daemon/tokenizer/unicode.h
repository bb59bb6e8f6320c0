// Unicode facts the tokenizer needs: UTF-8 decoding and encoding, the
// character classes the pre-tokenizer regexes use (\p{L}, \p{N}, \s, ...),
// and the one-to-one NFD and lowercase mappings WordPiece uses.
//
// Decoding follows llama.cpp's policy for bad input: a byte that does not
// start a well-formed sequence decodes as U+FFFD and costs one byte. Unlike
// llama.cpp, overlong forms, surrogates and values above U+10FFFF count as
// ill-formed too (llama.cpp decodes the first two to their values and fails
// on the last).
//
// The tables are generated (gen_unicode_table.py -> unicode_table.inc)
// from Python's unicodedata; all functions here are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace octo::tokenizer {

inline constexpr uint32_t kReplacementCharacter = 0xFFFD;
inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Class bits; a code point may have several (U+0020 is separator and
// whitespace). Unassigned code points (Cn) have none.
enum UnicodeClass : uint8_t {
  kLetter = 1 << 0,       // \p{L}
  kNumber = 1 << 1,       // \p{N}
  kWhitespace = 1 << 2,   // \s (the White_Space property)
  kPunctuation = 1 << 3,  // \p{P}
  kSymbol = 1 << 4,       // \p{S}
  kMark = 1 << 5,         // \p{M}
  kSeparator = 1 << 6,    // \p{Z}
  kOther = 1 << 7,        // \p{C} except unassigned: Cc, Cf, Co, Cs
};

// The class bits of `cp` (0 above U+10FFFF).
uint8_t UnicodeClassesOf(uint32_t cp);
inline bool IsLetter(uint32_t cp) { return UnicodeClassesOf(cp) & kLetter; }
inline bool IsNumber(uint32_t cp) { return UnicodeClassesOf(cp) & kNumber; }
inline bool IsWhitespace(uint32_t cp) { return UnicodeClassesOf(cp) & kWhitespace; }
inline bool IsPunctuation(uint32_t cp) { return UnicodeClassesOf(cp) & kPunctuation; }

// The first code point of cp's canonical decomposition (NFD), or cp when it
// has none: U+00E9 'é' -> 'e', U+1FEF '`' (Greek varia) -> '`'. This is
// llama.cpp's NFD, which keeps one code point per code point, so accents
// composed into a letter are dropped while separate combining marks stay.
uint32_t NfdBase(uint32_t cp);

// The first code point of cp's lowercase form (Python's str.lower()), or cp:
// 'A' -> 'a', U+0130 'İ' -> 'i'. llama.cpp's unicode_tolower.
uint32_t ToLower(uint32_t cp);

// Decodes the code point starting at text[*pos] and advances *pos past it:
// by its length when well formed, else by one byte, returning U+FFFD.
// Requires *pos < text.size().
uint32_t DecodeUtf8(absl::string_view text, size_t* pos);

// Every code point of `text`, decoded as DecodeUtf8 does.
std::vector<uint32_t> DecodeUtf8All(absl::string_view text);

// Appends the UTF-8 encoding of `cp` (U+FFFD for surrogates and values above
// U+10FFFF) to *out.
void AppendUtf8(uint32_t cp, std::string* out);

// Bytes a lead byte announces, from its high nibble alone: 1 for ASCII and
// continuation bytes, 2 for 0xC_/0xD_, 3 for 0xE_, 4 for 0xF_. Callers clamp
// to the bytes left. This is how llama.cpp cuts text into symbols before
// merging, ill-formed or not, so the merges see the same symbols.
size_t Utf8LengthFromLead(unsigned char lead);

}  // namespace octo::tokenizer
