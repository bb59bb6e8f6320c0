// WordPiece ("bert") encoding of one piece of text, as llama.cpp's
// llm_tokenizer_wpm does it (its LLAMA_VOCAB_TYPE_WPM). Internal to
// daemon/tokenizer.
//
// The text is cut into words, character by character, after each character
// is mapped to its NFD base (NfdBase: composed accents are dropped) and
// lowercased:
//  - whitespace ends a word and is dropped;
//  - NUL, U+FFFD (what ill-formed UTF-8 decodes to) and \p{C} (control,
//    format, private use) characters are dropped;
//  - punctuation (\p{P}), ASCII symbols (\p{S} below U+007F, e.g. "$+<=>^`|~")
//    and CJK ideographs are words of their own;
//  - everything else joins the current word.
// Each word, with "▁" (U+2581) in front, is then cut greedily from the left
// into the longest tokens of the vocabulary (by bytes, as llama.cpp compares
// them): the first token of a word starts with "▁", the others are plain
// continuations (convert_hf_to_gguf strips BERT's "##"). A word that cannot
// be covered entirely becomes one unknown token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "daemon/tokenizer/vocab.h"

namespace octo::tokenizer {

// The words of `text`, normalized as above (without the "▁").
std::vector<std::string> WpmWords(absl::string_view text);

// Appends the tokens of `text` to *out. Requires vocab.unk != kNoToken
// (ParseVocab checks that for a WordPiece vocabulary).
void EncodeWpm(const Vocab& vocab, absl::string_view text, std::vector<int32_t>* out);

}  // namespace octo::tokenizer
