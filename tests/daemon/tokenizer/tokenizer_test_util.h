// Helpers for the tokenizer tests: metadata lists built in memory, and the
// shared vocabularies loaded once.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "daemon/tokenizer/tokenizer.h"
#include "storage/gguf.h"
#include "storage/gguf_value.h"
#include "storage/manifest.h"
#include "tests/storage/gguf_bytes.h"

namespace octo::testing {

// Metadata values. The array builders StringArrayValue and ArrayValue come
// from gguf_bytes.h.
inline GgufValue F32Array(const std::vector<float>& values) {
  return ArrayValue(GgufValueType::kFloat32, values);
}
inline GgufValue I32Array(const std::vector<int32_t>& values) {
  return ArrayValue(GgufValueType::kInt32, values);
}
inline GgufValue U32(uint32_t v) { return GgufValue::Uint(GgufValueType::kUint32, v); }
inline GgufValue I32(int32_t v) { return GgufValue::Int(GgufValueType::kInt32, v); }

// Replaces (or adds) `key` in `kv`.
inline void Set(MetadataList& kv, const std::string& key, GgufValue value) {
  for (auto& [name, v] : kv) {
    if (name == key) {
      v = std::move(value);
      return;
    }
  }
  kv.emplace_back(key, std::move(value));
}

inline void Remove(MetadataList& kv, const std::string& key) {
  std::erase_if(kv, [&key](const auto& entry) { return entry.first == key; });
}

// A small SentencePiece vocabulary: <unk> <s> </s>, the 256 byte tokens, then
// `pieces` (normal, scored by position: earlier is better) and `extra`
// tokens with their types.
struct SpmVocabSpec {
  std::vector<std::string> pieces;
  std::vector<std::pair<std::string, int32_t>> extra;  // text, token type
  bool byte_tokens = true;
};
MetadataList SpmMetadata(const SpmVocabSpec& spec);

// A small byte-level BPE vocabulary: the 256 byte characters, then one token
// per merge ("a b" makes "ab", ranks in order), then `extra` tokens.
struct BpeVocabSpec {
  std::string pre = "gpt-2";
  std::vector<std::string> merges;
  std::vector<std::pair<std::string, int32_t>> extra;  // text, token type
};
MetadataList BpeMetadata(const BpeVocabSpec& spec);

// A small WordPiece ("bert") vocabulary: [PAD] [UNK] [CLS] [SEP] [MASK]
// (ids 0-4, with their id keys), then `pieces` (normal; word starts spelled
// with "▁") and `extra` tokens with their types.
struct WpmVocabSpec {
  std::vector<std::string> pieces;
  std::vector<std::pair<std::string, int32_t>> extra = {};  // text, token type
};
inline constexpr int32_t kWpmFirstPiece = 5;
MetadataList WpmMetadata(const WpmVocabSpec& spec);

// Tokenizer::FromMetadata(kv); fails the test (and then aborts) on an error.
Tokenizer MakeTokenizer(const MetadataList& kv);

// The metadata of a GGUF file under ../shared/models (the caller has checked
// it exists); fails the test on a read error.
MetadataList SharedModelMetadata(const std::string& relative_path);

// The tokenizer of a GGUF file under ../shared/models, cached per path.
const Tokenizer& SharedTokenizer(const std::string& relative_path);

// Text readable in a failure message: bytes outside printable ASCII escaped.
std::string Escaped(const std::string& text);

// llama.cpp's tokenizer test files: .inp holds the inputs, each followed by
// a "\n__ggml_vocab_test__\n" line (an input may itself be empty or hold
// newlines); .out one line of space-separated ids per input (empty for an
// input with no tokens).
std::vector<std::string> ReadVocabTestInputs(const std::string& path);
std::vector<std::vector<int32_t>> ReadVocabTestOutputs(const std::string& path);

}  // namespace octo::testing
