#include "tests/storage/gguf_bytes.h"

#include <cmath>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "storage/byte_order.h"
#include "storage/byte_source.h"

namespace octo::testing {
namespace {

template <typename T>
void Append(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  StoreLE<T>(b, v);
  out.insert(out.end(), b, b + sizeof(T));
}

}  // namespace

GgufBytes& GgufBytes::Bytes(const std::vector<uint8_t>& bytes) {
  bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  return *this;
}

GgufBytes& GgufBytes::Text(absl::string_view text) {
  bytes_.insert(bytes_.end(), text.begin(), text.end());
  return *this;
}

GgufBytes& GgufBytes::U8(uint8_t v) { bytes_.push_back(v); return *this; }
GgufBytes& GgufBytes::U32(uint32_t v) { Append(bytes_, v); return *this; }
GgufBytes& GgufBytes::U64(uint64_t v) { Append(bytes_, v); return *this; }
GgufBytes& GgufBytes::I32(int32_t v) { Append(bytes_, v); return *this; }
GgufBytes& GgufBytes::F32(float v) { Append(bytes_, v); return *this; }

GgufBytes& GgufBytes::Zeros(uint64_t n) {
  bytes_.resize(bytes_.size() + n, 0);
  return *this;
}

GgufBytes& GgufBytes::Magic() { return Text("GGUF"); }

GgufBytes& GgufBytes::Header(uint32_t version, uint64_t tensor_count, uint64_t kv_count) {
  return Magic().U32(version).U64(tensor_count).U64(kv_count);
}

GgufBytes& GgufBytes::Str(absl::string_view s) { return StrWithLength(s.size(), s); }

GgufBytes& GgufBytes::StrWithLength(uint64_t claimed_length, absl::string_view bytes) {
  return U64(claimed_length).Text(bytes);
}

GgufBytes& GgufBytes::Key(absl::string_view key, uint32_t type) { return Str(key).U32(type); }

GgufBytes& GgufBytes::KvU32(absl::string_view key, uint32_t v) { return Key(key, kTypeU32).U32(v); }
GgufBytes& GgufBytes::KvF32(absl::string_view key, float v) { return Key(key, kTypeF32).F32(v); }
GgufBytes& GgufBytes::KvStr(absl::string_view key, absl::string_view v) { return Key(key, kTypeStr).Str(v); }

GgufBytes& GgufBytes::KvStrArray(absl::string_view key, const std::vector<std::string>& v) {
  Key(key, kTypeArr).ArrayHeader(kTypeStr, v.size());
  for (const std::string& s : v) Str(s);
  return *this;
}

GgufBytes& GgufBytes::ArrayHeader(uint32_t element_type, uint64_t count) { return U32(element_type).U64(count); }

GgufBytes& GgufBytes::TensorInfo(absl::string_view name, const std::vector<uint64_t>& dims, uint32_t type,
                                 uint64_t offset) {
  return TensorInfoRaw(name, static_cast<uint32_t>(dims.size()), dims, type, offset);
}

GgufBytes& GgufBytes::TensorInfoRaw(absl::string_view name, uint32_t n_dims, const std::vector<uint64_t>& dims,
                                    uint32_t type, uint64_t offset) {
  Str(name).U32(n_dims);
  for (uint64_t d : dims) U64(d);
  return U32(type).U64(offset);
}

GgufBytes& GgufBytes::PadTo(uint64_t alignment) {
  while (bytes_.size() % alignment != 0) bytes_.push_back(0);
  return *this;
}

std::vector<TinyTensor> TinyLlamaTensors() {
  return {
      {"token_embd.weight", {32, 8}},
      {"output_norm.weight", {32}},
      {"output.weight", {32, 8}},
      {"blk.0.attn_norm.weight", {32}},
      {"blk.0.attn_q.weight", {32, 32}},
      {"blk.0.attn_k.weight", {32, 16}},
      {"blk.0.attn_v.weight", {32, 16}},
      {"blk.0.attn_output.weight", {32, 32}},
      {"blk.0.ffn_norm.weight", {32}},
      {"blk.0.ffn_gate.weight", {32, 64}},
      {"blk.0.ffn_up.weight", {32, 64}},
      {"blk.0.ffn_down.weight", {64, 32}},
  };
}

std::vector<uint8_t> ValidTinyGguf() {
  const std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "a", "b", "\xE2\x96\x81the", "c", "d"};
  const std::vector<TinyTensor> tensors = TinyLlamaTensors();
  constexpr uint64_t kKvCount = 15;
  GgufBytes b;
  b.Header(3, tensors.size(), kKvCount)
      .KvStr("general.architecture", "llama")
      .KvStr("general.name", "tiny")
      .KvU32("llama.block_count", 1)
      .KvU32("llama.context_length", 64)
      .KvU32("llama.embedding_length", 32)
      .KvU32("llama.feed_forward_length", 64)
      .KvU32("llama.attention.head_count", 4)
      .KvU32("llama.attention.head_count_kv", 2)
      .KvF32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .KvF32("llama.rope.freq_base", 10000.f)
      .KvStr("tokenizer.ggml.model", "llama")
      .KvStrArray("tokenizer.ggml.tokens", tokens);
  b.Key("tokenizer.ggml.scores", kTypeArr).ArrayHeader(kTypeF32, tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) b.F32(-static_cast<float>(i));
  b.Key("tokenizer.ggml.token_type", kTypeArr).ArrayHeader(kTypeI32, tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) b.I32(i < 3 ? 3 : 1);
  b.KvU32("tokenizer.ggml.bos_token_id", 1);

  // F32 tensors: every size is a multiple of 128 bytes, so with alignment
  // 32 they sit back to back and the last one ends the file.
  uint64_t offset = 0;
  for (const TinyTensor& t : tensors) {
    b.TensorInfo(t.name, t.dims, kGgmlF32, offset);
    uint64_t n = 1;
    for (uint64_t d : t.dims) n *= d;
    offset += n * 4;
  }
  b.PadTo(kGgufDefaultAlignment);
  uint32_t seed = 1;
  for (const TinyTensor& t : tensors) {
    uint64_t n = 1;
    for (uint64_t d : t.dims) n *= d;
    for (uint64_t i = 0; i < n; ++i) {
      seed = seed * 1664525u + 1013904223u;
      b.F32(static_cast<float>(static_cast<int32_t>(seed >> 16) % 200 - 100) / 1000.f);
    }
  }
  return b.Take();
}

absl::StatusOr<GgufFile> ParseGgufBytes(std::vector<uint8_t> bytes) {
  return GgufFile::Parse(std::make_unique<MemorySource>(std::move(bytes)));
}

GgufValue StringArrayValue(std::vector<std::string> elements) {
  GgufValue v;
  v.type = GgufValueType::kArray;
  v.element_type = GgufValueType::kString;
  v.count = elements.size();
  v.strings = std::move(elements);
  return v;
}

GgufValue ArrayOfArraysValue(std::vector<GgufValue> elements) {
  GgufValue v;
  v.type = GgufValueType::kArray;
  v.element_type = GgufValueType::kArray;
  v.count = elements.size();
  v.arrays = std::move(elements);
  return v;
}

namespace {

bool SameFloat(double a, double b) {
  return std::isnan(a) ? std::isnan(b) : (a == b && std::signbit(a) == std::signbit(b));
}

}  // namespace

std::string GgufValueDifference(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type) {
    return absl::StrCat("type ", GgufValueTypeName(a.type), " vs ", GgufValueTypeName(b.type));
  }
  if (IsGgufFloat(a.type)) {
    return SameFloat(a.float_value, b.float_value) ? "" : absl::StrCat(a.float_value, " vs ", b.float_value);
  }
  if (a.type != GgufValueType::kArray) {
    if (a.uint_value != b.uint_value || a.int_value != b.int_value) {
      return absl::StrCat(a.uint_value, "/", a.int_value, " vs ", b.uint_value, "/", b.int_value);
    }
    return a.string_value == b.string_value ? "" : "strings differ";
  }
  if (a.element_type != b.element_type || a.count != b.count) {
    return absl::StrCat("[", a.count, " x ", GgufValueTypeName(a.element_type), "] vs [", b.count, " x ",
                        GgufValueTypeName(b.element_type), "]");
  }
  if (a.strings != b.strings) return "string elements differ";
  if (a.arrays.size() != b.arrays.size()) return "nested array counts differ";
  for (size_t i = 0; i < a.arrays.size(); ++i) {
    std::string d = GgufValueDifference(a.arrays[i], b.arrays[i]);
    if (!d.empty()) return absl::StrCat("[", i, "]: ", d);
  }
  if (IsGgufFloat(a.element_type)) {
    if (a.raw.size() != b.raw.size()) return "element bytes differ";
    for (uint64_t i = 0; i < a.count; ++i) {
      if (!SameFloat(a.FloatElement(i), b.FloatElement(i))) return absl::StrCat("element ", i, " differs");
    }
    return "";
  }
  return a.raw == b.raw ? "" : "element bytes differ";
}

}  // namespace octo::testing
