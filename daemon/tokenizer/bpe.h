// Byte-level BPE ("gpt2") encoding, as llama.cpp's llm_tokenizer_bpe does it,
// and GPT-2's byte <-> character table. Internal to daemon/tokenizer.
//
// The text is cut into words by the vocabulary's pre-tokenizer; each word's
// bytes are mapped to GPT-2's printable characters (a space is "Ġ"); then the
// adjacent pair with the lowest merge rank (ties: the leftmost) is merged
// until no pair has a rank, with a priority queue over a linked list of
// symbols: O(n log n) per word. A llama-3 style pre-tokenizer takes a word
// that is itself a token whole. A final symbol that is no token becomes the
// tokens of its single bytes, where those exist.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "daemon/tokenizer/vocab.h"

namespace octo::tokenizer {

// GPT-2's table: printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for
// themselves; the other 68, in byte order, for U+0100, U+0101, ... . Entries
// are UTF-8.
const std::array<std::string, 256>& ByteToUnicode();

// The byte code point `cp` stands for in that table, or -1.
int UnicodeToByte(uint32_t cp);

// The bytes a byte-level token text stands for. A character outside the
// table (not written by a byte-level vocabulary) is kept as it is.
std::string ByteLevelDecode(absl::string_view token_text);

// Appends the tokens of `text` to *out.
void EncodeBpe(const Vocab& vocab, absl::string_view text, std::vector<int32_t>* out);

}  // namespace octo::tokenizer
