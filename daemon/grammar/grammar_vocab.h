// What a constrained generation needs of a model's vocabulary, built once per
// model: each token's bytes, the trie the mask walks, and which tokens end a
// generation (allowed only where the grammar is a whole match).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/grammar/grammar_matcher.h"

namespace octo {

// Masks a model keeps for every request (about 150 KB each on a Qwen vocabulary).
inline constexpr size_t kSharedMasks = 64;

struct GrammarVocab {
  // bytes[id]: what token `id` decodes to; empty for control tokens, which
  // a grammar never allows (an end token is allowed by CanEnd instead).
  GrammarVocab(std::vector<std::string> token_bytes, std::vector<int32_t> end_tokens)
      : bytes(std::move(token_bytes)), trie(bytes), ends(std::move(end_tokens)) {}

  std::vector<std::string> bytes;
  TokenTrie trie;
  std::vector<int32_t> ends;  // the tokens that end a generation (Tokenizer::IsEndOfGeneration)
  // Masks shared by every constrained generation on this model (one
  // vocabulary's worth of bytes each).
  mutable MaskCache masks{kSharedMasks};
};

}  // namespace octo
