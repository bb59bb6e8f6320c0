// Helpers for the tokenizer tests: metadata lists built in memory, and the
// shared vocabularies loaded once.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "daemon/tokenizer/tokenizer.h"
#include "storage/gguf.h"
#include "storage/gguf_value.h"
#include "storage/manifest.h"

namespace octo::testing {

inline GgufValue StringArray(std::vector<std::string> values) {
  GgufValue v;
  v.type = GgufValueType::kArray;
  v.element_type = GgufValueType::kString;
  v.count = values.size();
  v.strings = std::move(values);
  return v;
}

template <typename T>
GgufValue NumericArray(GgufValueType element_type, const std::vector<T>& values) {
  GgufValue v;
  v.type = GgufValueType::kArray;
  v.element_type = element_type;
  v.count = values.size();
  v.raw.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(v.raw.data(), values.data(), v.raw.size());  // little-endian host
  return v;
}

inline GgufValue F32Array(const std::vector<float>& values) {
  return NumericArray(GgufValueType::kFloat32, values);
}
inline GgufValue I32Array(const std::vector<int32_t>& values) {
  return NumericArray(GgufValueType::kInt32, values);
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

// The metadata of a GGUF file under ../shared/models (the caller has checked
// it exists); fails the test on a read error.
MetadataList SharedModelMetadata(const std::string& relative_path);

// The tokenizer of a GGUF file under ../shared/models, cached per path.
const Tokenizer& SharedTokenizer(const std::string& relative_path);

// Text readable in a failure message: bytes outside printable ASCII escaped.
std::string Escaped(const std::string& text);

}  // namespace octo::testing
