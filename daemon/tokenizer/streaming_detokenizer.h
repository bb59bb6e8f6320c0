// Token ids -> text as it is generated, one token at a time.
//
// A piece may end inside a UTF-8 character (byte tokens, or BPE tokens that
// split a character's bytes), so each Push returns only the text completed
// so far: always valid UTF-8. A tail that could still become a character is
// held back (at most 3 bytes); bytes that can no longer become one come out
// as U+FFFD, one per byte, as soon as that is known. Flush ends the stream:
// a held-back tail comes out as U+FFFD.
//
// Everything pushed and flushed, concatenated, equals Tokenizer::Decode of
// the same ids with each ill-formed byte replaced by U+FFFD (the decoding of
// unicode.h); for well-formed text, exactly Decode.
//
// Leading spaces are kept as the pieces have them (SentencePiece "▁Once"
// gives " Once"), which is what llama.cpp's server streams.
//
// Not thread-safe: one stream per object. Holds a copy of the Tokenizer.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "daemon/tokenizer/tokenizer.h"

namespace octo {

class StreamingDetokenizer {
 public:
  // render_special: as in Tokenizer::Piece.
  explicit StreamingDetokenizer(Tokenizer tokenizer, bool render_special = false)
      : tokenizer_(std::move(tokenizer)), render_special_(render_special) {}

  // Adds token `id` (any id; ones outside the vocabulary add nothing) and
  // returns the text it completes, possibly empty.
  std::string Push(int32_t id);

  // Returns what is held back, as U+FFFD per byte, and starts a new stream.
  std::string Flush();

  // Bytes held back at the moment (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  Tokenizer tokenizer_;
  bool render_special_;
  std::string pending_;  // the start of a character whose end has not come yet
};

}  // namespace octo
