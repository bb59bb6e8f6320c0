// The few UTF-8 facts the sampler's text handling needs: where characters
// start, whether a string is well formed, whether a tail is an unfinished
// character.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace octo {

// True for a byte that continues a multi-byte character (10xxxxxx).
inline bool IsUtf8Continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// Length of the character a lead byte starts: 1..4, or 0 for a byte that
// cannot start one (a continuation byte, 0xF8..0xFF).
size_t Utf8SequenceLength(unsigned char lead);

// True when `text` is well-formed UTF-8 (no overlong forms, no surrogates,
// nothing above U+10FFFF, no truncated character).
bool IsValidUtf8(absl::string_view text);

// Bytes at the end of `text` that begin a character but do not finish it
// (0..3): a lead byte followed by fewer continuation bytes than it needs.
// A stream cut there would split the character.
size_t IncompleteUtf8Tail(absl::string_view text);

// `text` with every byte that is not part of a well-formed character
// replaced by U+FFFD: a token's piece can be part of a character (byte
// tokens), and a protobuf string must be valid UTF-8.
std::string ReplaceInvalidUtf8(absl::string_view text);

// The largest cut <= `pos` that does not fall inside a character: moves back
// over at most three continuation bytes to the lead byte they belong to.
size_t Utf8CutBefore(absl::string_view text, size_t pos);

}  // namespace octo
