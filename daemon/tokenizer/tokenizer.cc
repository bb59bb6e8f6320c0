#include "daemon/tokenizer/tokenizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "daemon/tokenizer/bpe.h"
#include "daemon/tokenizer/spm.h"
#include "daemon/tokenizer/vocab.h"
#include "daemon/tokenizer/wpm.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

using tokenizer::Vocab;

constexpr absl::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 "▁"

// The byte a "<0xXX>" token stands for, or -1 when the text is not of that form.
int ByteTokenValue(absl::string_view text) {
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const int hi = hex(text[3]), lo = hex(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// What llama.cpp's token_to_piece(special = true) returns for each token.
std::vector<std::string> RenderPieces(const Vocab& vocab) {
  std::vector<std::string> pieces(vocab.tokens.size());
  for (size_t id = 0; id < pieces.size(); ++id) {
    const std::string& text = vocab.tokens[id];
    switch (vocab.types[id]) {
      case TokenType::kControl:
      case TokenType::kUnknown:
      case TokenType::kUserDefined:
        pieces[id] = text;
        break;
      case TokenType::kNormal:
        // SentencePiece and WordPiece mark a word start with "▁": a space.
        pieces[id] = vocab.kind == TokenizerKind::kByteLevelBpe ? tokenizer::ByteLevelDecode(text)
                                                                 : absl::StrReplaceAll(text, {{kSpmSpace, " "}});
        break;
      case TokenType::kByte:
        if (const int byte = ByteTokenValue(text); byte >= 0) {
          pieces[id] = std::string(1, static_cast<char>(byte));
        } else {
          pieces[id] = text;  // a byte-typed token with some other text: show what it says
        }
        break;
      case TokenType::kUnused:
      case TokenType::kUndefined:
        break;
    }
  }
  return pieces;
}

// A stretch of the input: plain text, or one special token found in it.
struct Fragment {
  int32_t token;  // kNoToken for text
  absl::string_view text;
};

// Cuts the special tokens out of `text`, as llama.cpp's
// tokenizer_st_partition does: each special token in turn (longest first)
// is searched for in every text fragment left by the earlier ones.
std::vector<Fragment> Partition(const Vocab& vocab, absl::string_view text, bool parse_special) {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({kNoToken, text});
  std::vector<Fragment> next;
  for (int32_t id : vocab.special_tokens) {
    const TokenType type = vocab.types[id];
    if (!parse_special && type != TokenType::kUserDefined) continue;
    const absl::string_view special = vocab.tokens[id];
    next.clear();
    bool found = false;
    for (const Fragment& fragment : fragments) {
      if (fragment.token != kNoToken) {
        next.push_back(fragment);
        continue;
      }
      absl::string_view rest = fragment.text;
      for (size_t at; (at = rest.find(special)) != absl::string_view::npos;) {
        found = true;
        if (at > 0) next.push_back({kNoToken, rest.substr(0, at)});
        next.push_back({id, special});
        rest.remove_prefix(at + special.size());
      }
      if (!rest.empty()) next.push_back({kNoToken, rest});
    }
    if (found) fragments.swap(next);
  }
  return fragments;
}

}  // namespace

absl::StatusOr<Tokenizer> Tokenizer::FromMetadata(const MetadataList& kv) {
  OCTO_ASSIGN_OR_RETURN(Vocab vocab, tokenizer::ParseVocab(kv));
  vocab.pieces = RenderPieces(vocab);
  return Tokenizer(std::make_shared<const Vocab>(std::move(vocab)));
}

std::vector<int32_t> Tokenizer::Encode(absl::string_view text, bool add_special, bool parse_special) const {
  const Vocab& vocab = *vocab_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && vocab.add_bos) out.push_back(vocab.bos);

  // SentencePiece puts a "▁" in front of the text and of any text that
  // follows a special token.
  bool after_special = true;
  std::string escaped;
  for (const Fragment& fragment : Partition(vocab, text, parse_special)) {
    if (fragment.token != kNoToken) {
      out.push_back(fragment.token);
      after_special = true;
      continue;
    }
    if (vocab.kind == TokenizerKind::kByteLevelBpe) {
      tokenizer::EncodeBpe(vocab, fragment.text, &out);
      continue;
    }
    if (vocab.kind == TokenizerKind::kWordPiece) {
      tokenizer::EncodeWpm(vocab, fragment.text, &out);
      continue;
    }
    escaped.clear();
    if (vocab.add_space_prefix && after_special) absl::StrAppend(&escaped, kSpmSpace);
    absl::StrAppend(&escaped, absl::StrReplaceAll(fragment.text, {{" ", kSpmSpace}}));
    tokenizer::EncodeSpm(vocab, escaped, &out);
    after_special = false;
  }

  // WordPiece ends with [SEP] (llama.cpp's BERT convention), the others with EOS.
  if (add_special && vocab.add_eos) out.push_back(vocab.kind == TokenizerKind::kWordPiece ? vocab.sep : vocab.eos);
  return out;
}

std::string Tokenizer::Piece(int32_t id, bool render_special) const {
  if (id < 0 || id >= vocab_->size()) return std::string();
  const TokenType type = vocab_->types[id];
  if (!render_special && (type == TokenType::kControl || type == TokenType::kUnknown)) return std::string();
  return vocab_->pieces[id];
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) out += Piece(id, render_special);
  return out;
}

int32_t Tokenizer::Find(absl::string_view text) const { return vocab_->Find(text); }

absl::string_view Tokenizer::TokenText(int32_t id) const {
  return id >= 0 && id < vocab_->size() ? absl::string_view(vocab_->tokens[id]) : absl::string_view();
}

TokenType Tokenizer::Type(int32_t id) const {
  return id >= 0 && id < vocab_->size() ? vocab_->types[id] : TokenType::kUndefined;
}

TokenizerKind Tokenizer::kind() const { return vocab_->kind; }
int32_t Tokenizer::vocab_size() const { return vocab_->size(); }
int32_t Tokenizer::bos() const { return vocab_->bos; }
int32_t Tokenizer::eos() const { return vocab_->eos; }
int32_t Tokenizer::eot() const { return vocab_->eot; }
int32_t Tokenizer::unk() const { return vocab_->unk; }
bool Tokenizer::add_bos() const { return vocab_->add_bos; }
bool Tokenizer::add_eos() const { return vocab_->add_eos; }

bool Tokenizer::IsEndOfGeneration(int32_t id) const { return vocab_->end_of_generation.contains(id); }

}  // namespace octo
