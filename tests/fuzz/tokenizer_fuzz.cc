// libFuzzer target for the tokenizers: hostile text and hostile token ids.
//
// Byte 0 picks one of FuzzTokenizers() and the flags; the rest is either
// text to encode (any bytes: broken UTF-8, control-token spellings, long
// runs) or little-endian int32 ids (any value: negative, past the
// vocabulary) to decode, piece by piece and through a StreamingDetokenizer.
// Invariants, from tokenizer.h and streaming_detokenizer.h: every encoded
// id is in the vocabulary; each streamed piece is valid UTF-8; for ids
// whose decoding is valid UTF-8, the stream gives exactly that text.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "daemon/tokenizer/streaming_detokenizer.h"
#include "storage/utf8.h"
#include "tests/fuzz/fuzz_vocab.h"

namespace {

void Check(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "tokenizer_fuzz: invariant broken: %s\n", what);
  std::abort();
}

void FuzzEncode(const octo::Tokenizer& tokenizer, absl::string_view text, bool add_special, bool parse_special) {
  const std::vector<int32_t> ids = tokenizer.Encode(text, add_special, parse_special);
  for (int32_t id : ids) Check(id >= 0 && id < tokenizer.vocab_size(), "an encoded id is in the vocabulary");
  (void)tokenizer.Decode(ids, /*render_special=*/parse_special);
}

void FuzzDecode(const octo::Tokenizer& tokenizer, const uint8_t* data, size_t size, bool render_special) {
  std::vector<int32_t> ids(size / 4);
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * 4);
  const std::string decoded = tokenizer.Decode(ids, render_special);
  octo::StreamingDetokenizer stream(tokenizer, render_special);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = stream.Push(id);
    Check(octo::IsValidUtf8(piece), "a streamed piece is valid UTF-8");
    Check(stream.pending_bytes() <= 3, "at most 3 bytes are held back");
    streamed += piece;
    (void)tokenizer.Piece(id, render_special);
    (void)tokenizer.TokenText(id);
    (void)tokenizer.IsEndOfGeneration(id);
  }
  const std::string tail = stream.Flush();
  Check(octo::IsValidUtf8(tail), "the flushed tail is valid UTF-8");
  streamed += tail;
  if (octo::IsValidUtf8(decoded)) Check(streamed == decoded, "well-formed text streams as Decode gives it");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::span<const octo::Tokenizer> tokenizers = octo::fuzzing::FuzzTokenizers();
  const uint8_t control = data[0];
  const octo::Tokenizer& tokenizer = tokenizers[(control >> 4) % tokenizers.size()];
  const bool first_flag = (control & 2) != 0, second_flag = (control & 4) != 0;
  if ((control & 1) == 0) {
    FuzzEncode(tokenizer, absl::string_view(reinterpret_cast<const char*>(data + 1), size - 1), first_flag,
               second_flag);
  } else {
    FuzzDecode(tokenizer, data + 1, size - 1, first_flag);
  }
  return 0;
}
