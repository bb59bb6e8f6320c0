#include "daemon/tokenizer/vocab.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "storage/status_macros.h"

namespace octo::tokenizer {
namespace {

constexpr absl::string_view kModelKey = "tokenizer.ggml.model";
constexpr absl::string_view kPreKey = "tokenizer.ggml.pre";
constexpr absl::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr absl::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr absl::string_view kTypesKey = "tokenizer.ggml.token_type";
constexpr absl::string_view kMergesKey = "tokenizer.ggml.merges";
constexpr absl::string_view kAddBosKey = "tokenizer.ggml.add_bos_token";
constexpr absl::string_view kAddEosKey = "tokenizer.ggml.add_eos_token";
constexpr absl::string_view kAddSpacePrefixKey = "tokenizer.ggml.add_space_prefix";
constexpr absl::string_view kBosKey = "tokenizer.ggml.bos_token_id";
constexpr absl::string_view kEosKey = "tokenizer.ggml.eos_token_id";

// 0xFFFFFFFF is what llama.cpp's writer stores for "no token" as a u32.
constexpr int64_t kNoTokenU32 = 0xFFFFFFFF;

// Texts llama.cpp treats as ending a generation (and as control tokens)
// whatever their type says.
constexpr absl::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "<end_of_utterance>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",  // DeepSeek's <｜end▁of▁sentence｜>
};
constexpr absl::string_view kEndOfMessageText = "<|eom_id|>";

absl::Status KeyError(absl::string_view key, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(key, ": ", message));
}

std::string Quoted(absl::string_view text) {
  constexpr size_t kMaxShown = 64;
  std::string out = absl::StrCat("'", absl::CHexEscape(text.substr(0, kMaxShown)), "'");
  if (text.size() > kMaxShown) out += "...";
  return out;
}

const GgufValue* FindKey(const MetadataList& kv, absl::string_view key) {
  for (const auto& [name, value] : kv) {
    if (name == key) return &value;
  }
  return nullptr;
}

// An array of `count` elements, each of the wanted kind, its storage
// consistent with its count (values built by hand need not be).
absl::StatusOr<const GgufValue*> FindArray(const MetadataList& kv, absl::string_view key, bool strings) {
  const GgufValue* value = FindKey(kv, key);
  if (value == nullptr) return nullptr;
  const bool element_ok = strings ? value->element_type == GgufValueType::kString
                                  : (IsGgufInteger(value->element_type) || IsGgufFloat(value->element_type));
  if (value->type != GgufValueType::kArray || !element_ok) {
    return KeyError(key, absl::StrCat("expected an array of ", strings ? "strings" : "numbers", ", got ",
                                      GgufValueTypeName(value->type),
                                      value->type == GgufValueType::kArray
                                          ? absl::StrCat(" of ", GgufValueTypeName(value->element_type))
                                          : ""));
  }
  const bool consistent = strings ? value->strings.size() == value->count
                                  : value->count <= value->raw.size() &&
                                        value->raw.size() == value->count * GgufScalarSize(value->element_type);
  if (!consistent) return KeyError(key, "array storage does not match its element count");
  return value;
}

absl::Status CheckPerToken(absl::string_view key, const GgufValue& value, size_t n_tokens) {
  if (value.count != n_tokens) {
    return KeyError(key, absl::StrCat(value.count, " entries for ", n_tokens, " tokens"));
  }
  return absl::OkStatus();
}

// A token id key: absent leaves *id alone; -1 (i32 or u32) means none.
absl::Status ReadTokenId(const MetadataList& kv, absl::string_view key, int32_t n_tokens, int32_t* id) {
  const GgufValue* value = FindKey(kv, key);
  if (value == nullptr) return absl::OkStatus();
  absl::StatusOr<int64_t> v = value->AsInt64();
  if (!v.ok() || !IsGgufInteger(value->type)) {
    return KeyError(key, absl::StrCat("expected an integer token id, got ", GgufValueTypeName(value->type)));
  }
  if (*v == -1 || *v == kNoTokenU32) {
    *id = kNoToken;
  } else if (*v < 0 || *v >= n_tokens) {
    return KeyError(key, absl::StrCat(*v, " is out of range (the vocabulary has ", n_tokens, " tokens)"));
  } else {
    *id = static_cast<int32_t>(*v);
  }
  return absl::OkStatus();
}

absl::Status ReadFlag(const MetadataList& kv, absl::string_view key, bool* flag) {
  const GgufValue* value = FindKey(kv, key);
  if (value == nullptr) return absl::OkStatus();
  absl::StatusOr<bool> v = value->AsBool();
  if (!v.ok()) return KeyError(key, v.status().message());
  *flag = *v;
  return absl::OkStatus();
}

absl::Status ReadTokens(const MetadataList& kv, Vocab& vocab) {
  OCTO_ASSIGN_OR_RETURN(const GgufValue* tokens, FindArray(kv, kTokensKey, /*strings=*/true));
  if (tokens == nullptr) return KeyError(kTokensKey, "missing");
  if (tokens->count == 0 || tokens->count > kMaxVocabSize) {
    return KeyError(kTokensKey, absl::StrCat(tokens->count, " tokens (expected 1 to ", kMaxVocabSize, ")"));
  }
  const size_t n = tokens->count;
  vocab.tokens = tokens->strings;
  vocab.ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (vocab.tokens[i].empty()) continue;  // llama.cpp renames these; nothing can match them
    auto [it, inserted] = vocab.ids.emplace(vocab.tokens[i], static_cast<int32_t>(i));
    if (!inserted) {
      return KeyError(kTokensKey,
                      absl::StrCat("duplicate token ", Quoted(vocab.tokens[i]), " at ids ", it->second, " and ", i));
    }
  }

  vocab.scores.assign(n, 0.0f);
  OCTO_ASSIGN_OR_RETURN(const GgufValue* scores, FindArray(kv, kScoresKey, /*strings=*/false));
  if (scores != nullptr) {
    OCTO_RETURN_IF_ERROR(CheckPerToken(kScoresKey, *scores, n));
    for (size_t i = 0; i < n; ++i) {
      vocab.scores[i] = static_cast<float>(scores->FloatElement(i));
      if (std::isnan(vocab.scores[i])) return KeyError(kScoresKey, absl::StrCat("score ", i, " is NaN"));
    }
  }

  vocab.types.assign(n, TokenType::kNormal);
  OCTO_ASSIGN_OR_RETURN(const GgufValue* types, FindArray(kv, kTypesKey, /*strings=*/false));
  if (types != nullptr) {
    if (!IsGgufInteger(types->element_type)) {
      return KeyError(kTypesKey, absl::StrCat("expected integers, got ", GgufValueTypeName(types->element_type)));
    }
    OCTO_RETURN_IF_ERROR(CheckPerToken(kTypesKey, *types, n));
    for (size_t i = 0; i < n; ++i) {
      const int64_t type = types->IntElement(i);
      if (type < 0 || type > static_cast<int64_t>(TokenType::kByte)) {
        return KeyError(kTypesKey, absl::StrCat("token ", i, " has unknown type ", type));
      }
      vocab.types[i] = static_cast<TokenType>(type);
    }
  }
  return absl::OkStatus();
}

absl::Status ReadMerges(const MetadataList& kv, Vocab& vocab) {
  OCTO_ASSIGN_OR_RETURN(const GgufValue* merges, FindArray(kv, kMergesKey, /*strings=*/true));
  if (merges == nullptr) return KeyError(kMergesKey, "missing (a gpt2 tokenizer needs its merges)");
  if (merges->count > kMaxVocabSize) return KeyError(kMergesKey, absl::StrCat(merges->count, " merges"));
  vocab.merge_ranks.reserve(merges->count);
  for (size_t i = 0; i < merges->count; ++i) {
    const std::string& merge = merges->strings[i];
    const size_t space = merge.size() < 2 ? std::string::npos : merge.find(' ', 1);
    if (space == std::string::npos || space + 1 == merge.size()) {
      return KeyError(kMergesKey, absl::StrCat("merge ", i, " ", Quoted(merge), " is not 'left right'"));
    }
    vocab.merge_ranks.emplace(merge, static_cast<int32_t>(i));  // keeps the first (lowest) rank
  }
  return absl::OkStatus();
}

// Which tokens end a generation, and the name-based type fix-ups llama.cpp
// applies to them.
void MarkEndOfGeneration(Vocab& vocab) {
  auto mark = [&vocab](int32_t id) {
    vocab.end_of_generation.insert(id);
    vocab.types[id] = TokenType::kControl;
  };
  for (absl::string_view text : kEndOfTurnTexts) {
    const int32_t id = vocab.Find(text);
    if (id == kNoToken) continue;
    if (vocab.eot == kNoToken) vocab.eot = id;
    mark(id);
  }
  if (vocab.eom == kNoToken) vocab.eom = vocab.Find(kEndOfMessageText);
  for (int32_t id : {vocab.eos, vocab.eot, vocab.eom}) {
    if (id != kNoToken) vocab.end_of_generation.insert(id);
  }
  if (vocab.eom != kNoToken) mark(vocab.eom);
}

void CollectSpecialTokens(Vocab& vocab) {
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenType type = vocab.types[id];
    if ((type == TokenType::kControl || type == TokenType::kUserDefined || type == TokenType::kUnknown) &&
        !vocab.tokens[id].empty()) {
      vocab.special_tokens.push_back(id);
    }
  }
  std::stable_sort(vocab.special_tokens.begin(), vocab.special_tokens.end(), [&vocab](int32_t a, int32_t b) {
    return vocab.tokens[a].size() > vocab.tokens[b].size();
  });
}

// llama.cpp's WordPiece puts [CLS] (bos) first and [SEP] last whenever
// special tokens are added, whatever add_bos_token/add_eos_token say, and
// turns a word it cannot cover into the unknown token: all three must exist.
absl::Status CheckWordPieceTokens(Vocab& vocab) {
  if (vocab.unk == kNoToken) {
    return KeyError("tokenizer.ggml.unknown_token_id", "names no token (a bert tokenizer needs one for unknown words)");
  }
  if (vocab.bos == kNoToken) return KeyError(kBosKey, "names no token (a bert tokenizer needs [CLS])");
  if (vocab.sep == kNoToken) {
    return KeyError("tokenizer.ggml.seperator_token_id", "names no token (a bert tokenizer needs [SEP])");
  }
  vocab.add_bos = true;
  vocab.add_eos = true;
  return absl::OkStatus();
}

}  // namespace

int32_t Vocab::MergeRank(absl::string_view left, absl::string_view right, std::string* scratch) const {
  // A merge "a b" was split at its first space after byte 0, so no left part
  // has a space past its first byte.
  if (left.size() > 1 && left.find(' ', 1) != absl::string_view::npos) return -1;
  scratch->assign(left.data(), left.size());
  scratch->push_back(' ');
  scratch->append(right.data(), right.size());
  auto it = merge_ranks.find(*scratch);
  return it == merge_ranks.end() ? -1 : it->second;
}

absl::StatusOr<Vocab> ParseVocab(const MetadataList& kv) {
  Vocab vocab;
  vocab.byte_tokens.fill(kNoToken);
  const GgufValue* model = FindKey(kv, kModelKey);
  if (model == nullptr) return KeyError(kModelKey, "missing");
  absl::StatusOr<absl::string_view> model_name = model->AsString();
  if (!model_name.ok()) return KeyError(kModelKey, model_name.status().message());
  if (*model_name == "llama") {
    vocab.kind = TokenizerKind::kSentencePiece;
  } else if (*model_name == "gpt2") {
    vocab.kind = TokenizerKind::kByteLevelBpe;
  } else if (*model_name == "bert") {
    vocab.kind = TokenizerKind::kWordPiece;
  } else {
    return KeyError(kModelKey,
                    absl::StrCat("unsupported tokenizer ", Quoted(*model_name), " (supported: llama, gpt2, bert)"));
  }

  OCTO_RETURN_IF_ERROR(ReadTokens(kv, vocab));
  const int32_t n = vocab.size();

  if (vocab.kind == TokenizerKind::kSentencePiece) {
    // llama.cpp's defaults for a SentencePiece vocabulary.
    vocab.bos = n > 1 ? 1 : kNoToken;
    vocab.eos = n > 2 ? 2 : kNoToken;
    vocab.unk = 0;
    vocab.add_bos = true;
    vocab.add_space_prefix = true;
    for (int byte = 0; byte < 256; ++byte) {
      int32_t id = vocab.Find(absl::StrFormat("<0x%02X>", byte));
      if (id == kNoToken) id = vocab.Find(std::string(1, static_cast<char>(byte)));
      vocab.byte_tokens[byte] = id;
    }
  } else if (vocab.kind == TokenizerKind::kWordPiece) {
    // llama.cpp's defaults are BERT's ids ([PAD] 0, [UNK] 100, [CLS] 101,
    // [SEP] 102, [MASK] 103), where the vocabulary has them.
    auto default_id = [n](int32_t id) { return id < n ? id : kNoToken; };
    vocab.pad = default_id(0);
    vocab.unk = default_id(100);
    vocab.bos = default_id(101);
    vocab.sep = default_id(102);
    vocab.mask = default_id(103);
    for (int32_t id = 0; id < n; ++id) {
      if (!vocab.tokens[id].empty()) vocab.prefix_trie.Insert(vocab.tokens[id], id);
    }
  } else {
    // BPE: no default special tokens (llama.cpp's 11 is a GPT-NeoX leftover).
    OCTO_RETURN_IF_ERROR(ReadMerges(kv, vocab));
    std::string pre_name;
    if (const GgufValue* pre = FindKey(kv, kPreKey)) {
      absl::StatusOr<absl::string_view> name = pre->AsString();
      if (!name.ok()) return KeyError(kPreKey, name.status().message());
      pre_name = std::string(*name);
    }
    OCTO_ASSIGN_OR_RETURN(vocab.pre, FindPreTokenizer(pre_name));
    vocab.add_bos = vocab.pre.add_bos_default;
  }

  OCTO_RETURN_IF_ERROR(ReadTokenId(kv, kBosKey, n, &vocab.bos));
  OCTO_RETURN_IF_ERROR(ReadTokenId(kv, kEosKey, n, &vocab.eos));
  OCTO_RETURN_IF_ERROR(ReadTokenId(kv, "tokenizer.ggml.eot_token_id", n, &vocab.eot));
  OCTO_RETURN_IF_ERROR(ReadTokenId(kv, "tokenizer.ggml.eom_token_id", n, &vocab.eom));
  OCTO_RETURN_IF_ERROR(ReadTokenId(kv, "tokenizer.ggml.unknown_token_id", n, &vocab.unk));
  OCTO_RETURN_IF_ERROR(ReadTokenId(kv, "tokenizer.ggml.seperator_token_id", n, &vocab.sep));
  OCTO_RETURN_IF_ERROR(ReadTokenId(kv, "tokenizer.ggml.padding_token_id", n, &vocab.pad));
  OCTO_RETURN_IF_ERROR(ReadTokenId(kv, "tokenizer.ggml.mask_token_id", n, &vocab.mask));
  OCTO_RETURN_IF_ERROR(ReadFlag(kv, kAddBosKey, &vocab.add_bos));
  OCTO_RETURN_IF_ERROR(ReadFlag(kv, kAddEosKey, &vocab.add_eos));
  if (vocab.kind == TokenizerKind::kSentencePiece) {
    OCTO_RETURN_IF_ERROR(ReadFlag(kv, kAddSpacePrefixKey, &vocab.add_space_prefix));
  }
  if (vocab.kind == TokenizerKind::kWordPiece) OCTO_RETURN_IF_ERROR(CheckWordPieceTokens(vocab));
  if (vocab.add_bos && vocab.bos == kNoToken) {
    return KeyError(kAddBosKey, absl::StrCat("true, but ", kBosKey, " names no token"));
  }
  if (vocab.add_eos && vocab.eos == kNoToken && vocab.kind != TokenizerKind::kWordPiece) {
    return KeyError(kAddEosKey, absl::StrCat("true, but ", kEosKey, " names no token"));
  }

  MarkEndOfGeneration(vocab);
  CollectSpecialTokens(vocab);
  return vocab;
}

}  // namespace octo::tokenizer
