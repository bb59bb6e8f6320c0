// Text <-> token ids for a GGUF model, from its tokenizer.* metadata, with
// llama.cpp's semantics (the ids must match what llama.cpp feeds the model).
//
//  - "llama" (SentencePiece): spaces become U+2581 "▁", a "▁" is put in front
//    of the text (add_space_prefix, default true), characters are merged by
//    the best-scoring pair, and a character with no token falls back to its
//    <0xXX> byte tokens, or to the unknown token.
//  - "gpt2" (byte-level BPE): the text is cut into words by the pre-tokenizer
//    that tokenizer.ggml.pre names (pretokenizer.h), each word's bytes are
//    mapped to GPT-2's printable characters, and pairs are merged in the
//    rank order of tokenizer.ggml.merges.
//  - "bert" (WordPiece, llama.cpp's WPM): the text is mapped to NFD base
//    characters, lowercased and cut into words at whitespace, punctuation
//    and CJK ideographs (wpm.h); each word, "▁" in front, is cut greedily
//    into the longest tokens, and a word that cannot be covered becomes the
//    unknown token. With add_special, [CLS] (bos) comes first and [SEP]
//    (seperator_token_id) last, whatever add_bos_token/add_eos_token say.
//    Defaults where a key is absent: BERT's ids [PAD] 0, [UNK] 100, [CLS]
//    101, [SEP] 102, [MASK] 103.
//
// Keys read (all "tokenizer.ggml.*"): model, pre, tokens, scores, token_type,
// merges, bos/eos/eot/eom/unknown/seperator/padding/mask _token_id,
// add_bos_token, add_eos_token, add_space_prefix. tokenizer.chat_template is
// not read here.
//
// Where this differs from llama.cpp (all outside what real models exercise):
//  - a BPE vocabulary without bos/eos ids has none (llama.cpp assumes 11);
//  - a character with neither a token nor byte tokens becomes <unk> once
//    (llama.cpp aborts);
//  - a BPE piece character outside GPT-2's byte table is rendered as it is
//    (llama.cpp writes "[UNK_BYTE_0x..]");
//  - a bert vocabulary without an unknown, [CLS] or [SEP] token is rejected
//    (llama.cpp loads it and fails or emits -1 when it needs one); overlong
//    UTF-8 forms are dropped as ill-formed (llama.cpp decodes them); Unicode
//    classes come from Unicode 14 (llama.cpp's table is newer: characters
//    assigned since then split words there); Decode does not apply
//    llama_detokenize's clean-up of spaces before ".,?!" and
//    contractions (clean_spaces) that WPM vocabularies turn on;
//  - the llama.cpp tokenizer models other than llama/gpt2/bert (t5, rwkv,
//    ...), pre-tokenizers not listed in pretokenizer.h, and the per-model
//    lstrip/rstrip token attributes (phi-3, jina-v2's <mask>) are not
//    supported.
//
// A Tokenizer is immutable once built: every method is const and safe to call
// from any number of threads. Copies are cheap and share the vocabulary.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/manifest.h"

namespace octo {

namespace tokenizer {
struct Vocab;
}  // namespace tokenizer

enum class TokenizerKind {
  kSentencePiece,  // tokenizer.ggml.model "llama"
  kByteLevelBpe,   // tokenizer.ggml.model "gpt2"
  kWordPiece,      // tokenizer.ggml.model "bert"
};

// llama.cpp's token types (tokenizer.ggml.token_type values).
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // <s>, </s>, <|im_start|>, ...: rendered only on request
  kUserDefined = 4,  // added tokens: always matched in the input, rendered as written
  kUnused = 5,
  kByte = 6,  // SentencePiece byte fallback, text "<0xXX>"
};

// An id that names no token (a special token the model does not have).
inline constexpr int32_t kNoToken = -1;

class Tokenizer {
 public:
  // Builds the tokenizer from a model's metadata (a GgufFile's metadata() or
  // a Manifest's `tokenizer` list; other keys are ignored). INVALID_ARGUMENT
  // naming the key on: a missing or mistyped tokens/model key, an unknown
  // tokenizer model or pre-tokenizer, scores or token_type not one per token,
  // a NaN score, an unknown token type, a duplicate token, a missing or
  // unparsable merge (a BPE merge is "left right"), a special token id out of
  // range (-1 as i32 or u32 means "none"), add_bos_token/add_eos_token set
  // without the token to add, or a bert vocabulary without an unknown, [CLS]
  // (bos) or [SEP] (seperator) token.
  static absl::StatusOr<Tokenizer> FromMetadata(const MetadataList& kv);

  // Token ids for `text`: any bytes. Ill-formed UTF-8 is handled as llama.cpp
  // handles it (SentencePiece falls back to byte tokens; byte-level BPE sees
  // U+FFFD), except for the cases unicode.h lists.
  //  add_special: put BOS in front / EOS at the end when add_bos_token /
  //    add_eos_token say so (SentencePiece defaults: BOS yes, EOS no);
  //    WordPiece: always [CLS] in front and [SEP] at the end.
  //  parse_special: text spelling a control token ("<|im_start|>", "<s>")
  //    becomes that token; otherwise it is tokenized as plain text.
  //    User-defined tokens are always matched, as in llama.cpp.
  std::vector<int32_t> Encode(absl::string_view text, bool add_special, bool parse_special) const;

  // The bytes token `id` stands for: SentencePiece and WordPiece "▁" becomes
  // " " (a WordPiece continuation is its text as it is) and a byte
  // token its byte; BPE pieces map back through GPT-2's byte table. Control
  // and unknown tokens are empty unless `render_special`; unused and undefined
  // ones are always empty, and so is an id outside [0, vocab_size()). A piece
  // may be part of a UTF-8 character (byte tokens); see StreamingDetokenizer.
  std::string Piece(int32_t id, bool render_special) const;

  // The pieces of `ids`, concatenated (bytes, possibly not valid UTF-8).
  std::string Decode(std::span<const int32_t> ids, bool render_special) const;

  // The id whose token text is exactly `text` (raw, e.g. "▁the", "Ġthe",
  // "<|im_end|>"), or kNoToken.
  int32_t Find(absl::string_view text) const;

  // The raw token text and type; empty / kUndefined outside the vocabulary.
  absl::string_view TokenText(int32_t id) const;
  TokenType Type(int32_t id) const;

  TokenizerKind kind() const;
  int32_t vocab_size() const;
  int32_t bos() const;  // kNoToken when the model has none
  int32_t eos() const;
  int32_t eot() const;  // end of turn (e.g. <|eot_id|>, <|im_end|>)
  int32_t unk() const;
  bool add_bos() const;
  bool add_eos() const;  // WordPiece: true, and the token added is [SEP]

  // True for the tokens that end a generation: eos, eot, eom, and tokens
  // llama.cpp recognizes by name (<|eot_id|>, <|im_end|>, <|endoftext|>,
  // <end_of_turn>, <|end|>, <|eom_id|>, ...).
  bool IsEndOfGeneration(int32_t id) const;

 private:
  explicit Tokenizer(std::shared_ptr<const tokenizer::Vocab> vocab) : vocab_(std::move(vocab)) {}

  std::shared_ptr<const tokenizer::Vocab> vocab_;  // never null
};

}  // namespace octo
