#include "storage/gguf_value.h"

#include <array>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "storage/byte_order.h"

namespace octo {
namespace {

constexpr std::array<absl::string_view, kGgufValueTypeCount> kNames = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"};

absl::Status WrongType(const GgufValue& v, absl::string_view wanted) {
  return absl::InvalidArgumentError(
      absl::StrCat("value has type ", GgufValueTypeName(v.type), ", expected ", wanted));
}

std::string QuoteForDisplay(absl::string_view s, size_t max_len) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < max_len; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n') out += "\\n";
    else if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20) absl::StrAppendFormat(&out, "\\x%02x", c);
    else out += static_cast<char>(c);
  }
  if (s.size() > max_len) absl::StrAppend(&out, "...(", s.size(), " bytes)");
  return out + "\"";
}

}  // namespace

absl::string_view GgufValueTypeName(GgufValueType type) {
  uint32_t id = static_cast<uint32_t>(type);
  return id < kGgufValueTypeCount ? kNames[id] : "?";
}

absl::StatusOr<GgufValueType> GgufValueTypeFromName(absl::string_view name) {
  for (uint32_t i = 0; i < kGgufValueTypeCount; ++i) {
    if (kNames[i] == name) return static_cast<GgufValueType>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown GGUF value type '", name, "'"));
}

uint32_t GgufScalarSize(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64: return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray: return 0;
  }
  return 0;
}

bool IsGgufInteger(GgufValueType t) {
  return t == GgufValueType::kUint8 || t == GgufValueType::kInt8 || t == GgufValueType::kUint16 ||
         t == GgufValueType::kInt16 || t == GgufValueType::kUint32 || t == GgufValueType::kInt32 ||
         t == GgufValueType::kUint64 || t == GgufValueType::kInt64;
}

bool IsGgufFloat(GgufValueType t) { return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64; }

static bool IsSigned(GgufValueType t) {
  return t == GgufValueType::kInt8 || t == GgufValueType::kInt16 || t == GgufValueType::kInt32 ||
         t == GgufValueType::kInt64;
}

absl::StatusOr<uint64_t> GgufValue::AsUint64() const {
  if (!IsGgufInteger(type)) return WrongType(*this, "an integer");
  if (IsSigned(type)) {
    if (int_value < 0) return absl::InvalidArgumentError(absl::StrCat("value ", int_value, " is negative"));
    return static_cast<uint64_t>(int_value);
  }
  return uint_value;
}

absl::StatusOr<int64_t> GgufValue::AsInt64() const {
  if (!IsGgufInteger(type)) return WrongType(*this, "an integer");
  if (IsSigned(type)) return int_value;
  if (uint_value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("value ", uint_value, " does not fit in int64"));
  }
  return static_cast<int64_t>(uint_value);
}

absl::StatusOr<double> GgufValue::AsDouble() const {
  if (IsGgufFloat(type)) return float_value;
  if (IsGgufInteger(type)) return IsSigned(type) ? static_cast<double>(int_value) : static_cast<double>(uint_value);
  return WrongType(*this, "a number");
}

absl::StatusOr<bool> GgufValue::AsBool() const {
  if (type != GgufValueType::kBool) return WrongType(*this, "bool");
  return uint_value != 0;
}

absl::StatusOr<absl::string_view> GgufValue::AsString() const {
  if (type != GgufValueType::kString) return WrongType(*this, "str");
  return absl::string_view(string_value);
}

int64_t GgufValue::IntElement(uint64_t i) const {
  const uint8_t* p = raw.data() + i * GgufScalarSize(element_type);
  switch (element_type) {
    case GgufValueType::kUint8: return *p;
    case GgufValueType::kBool: return *p != 0;
    case GgufValueType::kInt8: return static_cast<int8_t>(*p);
    case GgufValueType::kUint16: return LoadLE<uint16_t>(p);
    case GgufValueType::kInt16: return LoadLE<int16_t>(p);
    case GgufValueType::kUint32: return LoadLE<uint32_t>(p);
    case GgufValueType::kInt32: return LoadLE<int32_t>(p);
    case GgufValueType::kUint64: return static_cast<int64_t>(LoadLE<uint64_t>(p));
    case GgufValueType::kInt64: return LoadLE<int64_t>(p);
    default: return 0;  // floats: use FloatElement (a NaN has no integer value)
  }
}

double GgufValue::FloatElement(uint64_t i) const {
  const uint8_t* p = raw.data() + i * GgufScalarSize(element_type);
  switch (element_type) {
    case GgufValueType::kFloat32: return LoadLE<float>(p);
    case GgufValueType::kFloat64: return LoadLE<double>(p);
    case GgufValueType::kUint64: return static_cast<double>(LoadLE<uint64_t>(p));
    default: return static_cast<double>(IntElement(i));
  }
}

uint64_t GgufValue::HeapBytes() const {
  uint64_t bytes = string_value.size() + raw.size();
  for (const std::string& s : strings) bytes += sizeof(std::string) + s.size();
  for (const GgufValue& a : arrays) bytes += sizeof(GgufValue) + a.HeapBytes();
  return bytes;
}

GgufValue GgufValue::Uint(GgufValueType type, uint64_t v) {
  GgufValue value;
  value.type = type;
  value.uint_value = v;
  return value;
}

GgufValue GgufValue::Int(GgufValueType type, int64_t v) {
  GgufValue value;
  value.type = type;
  value.int_value = v;
  return value;
}

GgufValue GgufValue::Float(GgufValueType type, double v) {
  GgufValue value;
  value.type = type;
  value.float_value = v;
  return value;
}

GgufValue GgufValue::Bool(bool v) { return Uint(GgufValueType::kBool, v ? 1 : 0); }

GgufValue GgufValue::String(std::string v) {
  GgufValue value;
  value.type = GgufValueType::kString;
  value.string_value = std::move(v);
  return value;
}

std::string GgufValueToDisplay(const GgufValue& v, int max_elements) {
  switch (v.type) {
    case GgufValueType::kString: return QuoteForDisplay(v.string_value, 200);
    case GgufValueType::kBool: return v.uint_value ? "true" : "false";
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64: return absl::StrFormat("%g", v.float_value);
    case GgufValueType::kArray: break;
    default: {
      auto i = v.AsInt64();
      return i.ok() ? absl::StrCat(*i) : absl::StrCat(v.uint_value);
    }
  }
  std::string out = absl::StrCat("[", v.count, " x ", GgufValueTypeName(v.element_type), "]");
  const uint64_t shown = std::min<uint64_t>(v.count, static_cast<uint64_t>(max_elements));
  for (uint64_t i = 0; i < shown; ++i) {
    out += i == 0 ? " " : ", ";
    if (v.element_type == GgufValueType::kString) out += QuoteForDisplay(v.strings[i], 40);
    else if (v.element_type == GgufValueType::kArray) out += GgufValueToDisplay(v.arrays[i], 2);
    else if (IsGgufFloat(v.element_type)) absl::StrAppendFormat(&out, "%g", v.FloatElement(i));
    else absl::StrAppend(&out, v.IntElement(i));
  }
  if (v.count > shown) out += ", ...";
  return out;
}

}  // namespace octo
