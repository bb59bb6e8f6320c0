// SentencePiece ("llama") encoding of one piece of text, as llama.cpp's
// llm_tokenizer_spm does it. Internal to daemon/tokenizer.
//
// The text is cut into UTF-8 characters, then the adjacent pair whose join
// is the best-scoring token (ties: the leftmost) is merged, again and again,
// with a priority queue over a linked list of symbols: O(n log n). A final
// symbol that is no token becomes its byte tokens (<0xXX>) when the
// vocabulary has them all, else the unknown token, else nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "daemon/tokenizer/vocab.h"

namespace octo::tokenizer {

// Appends the tokens of `text` to *out. `text` is already escaped (spaces as
// "▁", the prefix "▁" added by the caller when the model wants it).
void EncodeSpm(const Vocab& vocab, absl::string_view text, std::vector<int32_t>* out);

}  // namespace octo::tokenizer
