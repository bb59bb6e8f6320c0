// The parsed and checked tokenizer.* metadata that the encoders and the
// Tokenizer share. Internal to daemon/tokenizer: use tokenizer.h.
//
// ParseVocab reads the keys llama.cpp's GGUF writer uses and applies
// llama.cpp's defaults and name-based fix-ups (which tokens end a
// generation); see tokenizer.h for the error contract. A Vocab is immutable
// after parsing.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/tokenizer/prefix_trie.h"
#include "daemon/tokenizer/pretokenizer.h"
#include "daemon/tokenizer/tokenizer.h"
#include "storage/manifest.h"

namespace octo::tokenizer {

// The most tokens a vocabulary may have (ids are int32; real ones are < 300K).
inline constexpr uint64_t kMaxVocabSize = 1u << 24;

struct Vocab {
  TokenizerKind kind = TokenizerKind::kSentencePiece;

  std::vector<std::string> tokens;  // raw text by id
  std::vector<float> scores;        // by id; 0 when the key is absent
  std::vector<TokenType> types;     // by id; kNormal when the key is absent
  std::vector<std::string> pieces;  // by id: what Piece(id, render_special=true) returns
  absl::flat_hash_map<std::string, int32_t> ids;  // text -> id (empty texts are left out)

  // SentencePiece byte fallback: the token for each byte ("<0xXX>", else the
  // one-byte text), or kNoToken.
  std::array<int32_t, 256> byte_tokens;

  // Byte-level BPE: "left right" -> merge rank (the first of duplicates), and
  // the pre-tokenizer.
  absl::flat_hash_map<std::string, int32_t> merge_ranks;
  PreTokenizer pre;

  // WordPiece: every token text, for the greedy longest match.
  PrefixTrie prefix_trie;

  int32_t bos = kNoToken, eos = kNoToken, eot = kNoToken, eom = kNoToken;
  int32_t unk = kNoToken, sep = kNoToken, pad = kNoToken, mask = kNoToken;
  bool add_bos = false;
  bool add_eos = false;  // WordPiece: adds sep, not eos
  bool add_space_prefix = false;  // SentencePiece only
  absl::flat_hash_set<int32_t> end_of_generation;

  // Tokens the input is searched for before tokenizing (control, user-defined
  // and unknown ones), longest text first, ties by id.
  std::vector<int32_t> special_tokens;

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  int32_t Find(absl::string_view text) const {
    auto it = ids.find(text);
    return it == ids.end() ? kNoToken : it->second;
  }
  // The rank of merging `left` and `right`, or -1. Matches llama.cpp's
  // parsing of a merge: split at the first space after the first byte.
  int32_t MergeRank(absl::string_view left, absl::string_view right, std::string* scratch) const;
};

absl::StatusOr<Vocab> ParseVocab(const MetadataList& kv);

}  // namespace octo::tokenizer
