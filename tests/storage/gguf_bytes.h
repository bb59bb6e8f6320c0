// A byte-level GGUF builder for tests of the parser's defences.
//
// Unlike a real writer it checks nothing: every field is appended exactly as
// given (a string length may lie, n_dims may disagree with the dims that
// follow, a type id may be unknown), so a test can build a file that is
// valid except for the one defect it is about. All integers are written
// little-endian, as GGUF stores them. Also: a small valid model to start
// from, and GgufValue array builders and a comparison for round-trip tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/gguf.h"

namespace octo::testing {

// Value type ids (GgufValueType) and ggml type ids as raw numbers, so tests
// can also write ids that are not in the enums.
inline constexpr uint32_t kTypeU8 = 0, kTypeI8 = 1, kTypeU16 = 2, kTypeI16 = 3, kTypeU32 = 4, kTypeI32 = 5,
                          kTypeF32 = 6, kTypeBool = 7, kTypeStr = 8, kTypeArr = 9, kTypeU64 = 10,
                          kTypeI64 = 11, kTypeF64 = 12;
inline constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ8_0 = 8, kGgmlQ8_1 = 9;

class GgufBytes {
 public:
  // Raw fields.
  GgufBytes& Bytes(const std::vector<uint8_t>& bytes);
  GgufBytes& Text(absl::string_view text);  // the characters, no length
  GgufBytes& U8(uint8_t v);
  GgufBytes& U32(uint32_t v);
  GgufBytes& U64(uint64_t v);
  GgufBytes& I32(int32_t v);
  GgufBytes& F32(float v);
  GgufBytes& Zeros(uint64_t n);

  // "GGUF", then the header fields. Header() writes all four.
  GgufBytes& Magic();
  GgufBytes& Header(uint32_t version, uint64_t tensor_count, uint64_t kv_count);

  // A GGUF string: u64 length, then the bytes. StrWithLength writes
  // `claimed_length` as the length whatever the size of `bytes`.
  GgufBytes& Str(absl::string_view s);
  GgufBytes& StrWithLength(uint64_t claimed_length, absl::string_view bytes);

  // A metadata entry's key and type id; the caller appends the value.
  GgufBytes& Key(absl::string_view key, uint32_t type);
  // Whole metadata entries.
  GgufBytes& KvU32(absl::string_view key, uint32_t v);
  GgufBytes& KvF32(absl::string_view key, float v);
  GgufBytes& KvStr(absl::string_view key, absl::string_view v);
  GgufBytes& KvStrArray(absl::string_view key, const std::vector<std::string>& v);
  // An array value's header: element type id and count; elements follow.
  GgufBytes& ArrayHeader(uint32_t element_type, uint64_t count);

  // A tensor info: name, n_dims = dims.size(), dims, ggml type id, offset
  // relative to the data section. TensorInfoRaw writes `n_dims` as given.
  GgufBytes& TensorInfo(absl::string_view name, const std::vector<uint64_t>& dims, uint32_t type,
                        uint64_t offset);
  GgufBytes& TensorInfoRaw(absl::string_view name, uint32_t n_dims, const std::vector<uint64_t>& dims,
                           uint32_t type, uint64_t offset);

  // Zero bytes up to the next multiple of `alignment` (GGUF's padding before
  // the data section).
  GgufBytes& PadTo(uint64_t alignment);

  uint64_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t> Take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

// One tensor of the tiny model: name and dims (ggml order).
struct TinyTensor {
  std::string name;
  std::vector<uint64_t> dims;
};

// The tensors of ValidTinyGguf(), in file order: a llama with dim 32, one
// layer, 4 heads (2 KV heads, head_dim 8), FFN width 64 and 8 tokens.
std::vector<TinyTensor> TinyLlamaTensors();

// A small valid GGUF v3 llama file (~40 KB, F32 tensors with non-zero data,
// default alignment 32, a tokenizer with 8 tokens). The last tensor ends at
// the end of the file, so any truncation removes bytes some field needs.
// GgufFile::Parse and PlanLayerDirectory accept it.
std::vector<uint8_t> ValidTinyGguf();

// GgufFile::Parse over a MemorySource holding `bytes`.
absl::StatusOr<GgufFile> ParseGgufBytes(std::vector<uint8_t> bytes);

// GgufValue arrays, for tests of the JSON encoding. T must have the element
// type's size (uint8_t for bool).
template <typename T>
GgufValue ArrayValue(GgufValueType element_type, const std::vector<T>& elements) {
  GgufValue v;
  v.type = GgufValueType::kArray;
  v.element_type = element_type;
  v.count = elements.size();
  v.raw.resize(elements.size() * sizeof(T));
  if (!elements.empty()) std::memcpy(v.raw.data(), elements.data(), v.raw.size());
  return v;
}
GgufValue StringArrayValue(std::vector<std::string> elements);
GgufValue ArrayOfArraysValue(std::vector<GgufValue> elements);

// Empty when `a` and `b` hold the same value (NaN equals NaN, -0 differs
// from +0); otherwise a description of the first difference.
std::string GgufValueDifference(const GgufValue& a, const GgufValue& b);

}  // namespace octo::testing
