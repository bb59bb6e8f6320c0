#include "storage/gguf_json.h"
#include "storage/utf8.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "storage/byte_order.h"
#include "storage/gguf.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

using nlohmann::json;

json StringToJson(const std::string& s) {
  if (IsValidUtf8(s)) return s;
  return json{{"hex", absl::BytesToHexString(s)}};
}

absl::StatusOr<std::string> StringFromJson(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.size() == 1 && j.contains("hex") && j["hex"].is_string()) {
    const std::string hex = j["hex"].get<std::string>();
    if (hex.size() % 2 != 0 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      return absl::InvalidArgumentError("\"hex\" string is not valid hexadecimal");
    }
    return absl::HexStringToBytes(hex);
  }
  return absl::InvalidArgumentError("expected a string or {\"hex\": ...}");
}

// Non-finite floats have no JSON number: they are spelled as strings.
json FloatToJson(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  return f;
}

absl::StatusOr<double> FloatFromJson(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (j == "inf") return std::numeric_limits<double>::infinity();
  if (j == "-inf") return -std::numeric_limits<double>::infinity();
  return absl::InvalidArgumentError("expected a number");
}

// Range of each integer type.
void IntegerRange(GgufValueType t, int64_t* lo, uint64_t* hi) {
  switch (t) {
    case GgufValueType::kUint8: *lo = 0; *hi = 0xFF; return;
    case GgufValueType::kInt8: *lo = -128; *hi = 127; return;
    case GgufValueType::kUint16: *lo = 0; *hi = 0xFFFF; return;
    case GgufValueType::kInt16: *lo = -32768; *hi = 32767; return;
    case GgufValueType::kUint32: *lo = 0; *hi = 0xFFFFFFFFu; return;
    case GgufValueType::kInt32: *lo = std::numeric_limits<int32_t>::min(); *hi = std::numeric_limits<int32_t>::max(); return;
    case GgufValueType::kInt64: *lo = std::numeric_limits<int64_t>::min(); *hi = std::numeric_limits<int64_t>::max(); return;
    default: *lo = 0; *hi = std::numeric_limits<uint64_t>::max(); return;
  }
}

// Parses one scalar of `type` and stores it little-endian at `out` (for
// arrays) and/or in `value` (for scalars).
absl::Status ScalarFromJson(const json& j, GgufValueType type, GgufValue* value, uint8_t* out) {
  if (type == GgufValueType::kBool) {
    if (!j.is_boolean()) return absl::InvalidArgumentError("expected true or false");
    value->uint_value = j.get<bool>();
    if (out) *out = j.get<bool>() ? 1 : 0;
    return absl::OkStatus();
  }
  if (IsGgufFloat(type)) {
    OCTO_ASSIGN_OR_RETURN(double f, FloatFromJson(j));
    value->float_value = type == GgufValueType::kFloat32 ? static_cast<float>(f) : f;
    if (out && type == GgufValueType::kFloat32) StoreLE<float>(out, static_cast<float>(f));
    if (out && type == GgufValueType::kFloat64) StoreLE<double>(out, f);
    return absl::OkStatus();
  }
  int64_t lo;
  uint64_t hi;
  IntegerRange(type, &lo, &hi);
  const bool is_signed = lo < 0;
  uint64_t bits = 0;
  if (j.is_number_unsigned()) {
    const uint64_t u = j.get<uint64_t>();
    if (u > hi) return absl::InvalidArgumentError(absl::StrCat(u, " is out of range for ", GgufValueTypeName(type)));
    bits = u;
    if (is_signed) value->int_value = static_cast<int64_t>(u);
    else value->uint_value = u;
  } else if (j.is_number_integer()) {
    const int64_t i = j.get<int64_t>();
    if (i < lo) return absl::InvalidArgumentError(absl::StrCat(i, " is out of range for ", GgufValueTypeName(type)));
    bits = static_cast<uint64_t>(i);
    value->int_value = i;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("expected an integer for ", GgufValueTypeName(type)));
  }
  if (out) std::memcpy(out, &bits, GgufScalarSize(type));  // little-endian host: low bytes first
  return absl::OkStatus();
}

absl::StatusOr<GgufValue> FromJsonAtDepth(const json& j, uint32_t depth) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string() || !j.contains("value")) {
    return absl::InvalidArgumentError("a metadata value must be {\"type\": ..., \"value\": ...}");
  }
  OCTO_ASSIGN_OR_RETURN(GgufValueType type, GgufValueTypeFromName(j["type"].get<std::string>()));
  const json& v = j["value"];
  GgufValue value;
  value.type = type;
  if (type == GgufValueType::kString) {
    OCTO_ASSIGN_OR_RETURN(value.string_value, StringFromJson(v));
    return value;
  }
  if (type != GgufValueType::kArray) {
    OCTO_RETURN_IF_ERROR(ScalarFromJson(v, type, &value, nullptr));
    return value;
  }
  if (depth >= kGgufMaxArrayDepth) return absl::InvalidArgumentError("arrays nested too deeply");
  if (!j.contains("element_type") || !j["element_type"].is_string() || !v.is_array()) {
    return absl::InvalidArgumentError("an array needs \"element_type\" and a JSON array \"value\"");
  }
  OCTO_ASSIGN_OR_RETURN(value.element_type, GgufValueTypeFromName(j["element_type"].get<std::string>()));
  value.count = v.size();
  if (value.count > kGgufMaxArrayElements) return absl::InvalidArgumentError("array has too many elements");
  for (uint64_t i = 0; i < value.count; ++i) {
    absl::Status status;
    if (value.element_type == GgufValueType::kString) {
      auto s = StringFromJson(v[i]);
      status = s.status();
      if (s.ok()) value.strings.push_back(std::move(*s));
    } else if (value.element_type == GgufValueType::kArray) {
      auto a = FromJsonAtDepth(v[i], depth + 1);
      status = a.status();
      if (a.ok() && a->type != GgufValueType::kArray) status = absl::InvalidArgumentError("element is not an array");
      if (status.ok()) value.arrays.push_back(std::move(*a));
    } else {
      const uint32_t size = GgufScalarSize(value.element_type);
      value.raw.resize((i + 1) * size);
      GgufValue scratch;
      status = ScalarFromJson(v[i], value.element_type, &scratch, value.raw.data() + i * size);
    }
    if (!status.ok()) return Annotate(status, absl::StrCat("element ", i));
  }
  return value;
}

}  // namespace


json GgufValueToJson(const GgufValue& v) {
  json j = {{"type", std::string(GgufValueTypeName(v.type))}};
  switch (v.type) {
    case GgufValueType::kString: j["value"] = StringToJson(v.string_value); return j;
    case GgufValueType::kBool: j["value"] = v.uint_value != 0; return j;
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64: j["value"] = FloatToJson(v.float_value); return j;
    case GgufValueType::kArray: break;
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64: j["value"] = v.int_value; return j;
    default: j["value"] = v.uint_value; return j;
  }
  j["element_type"] = std::string(GgufValueTypeName(v.element_type));
  json elements = json::array();
  for (uint64_t i = 0; i < v.count; ++i) {
    switch (v.element_type) {
      case GgufValueType::kString: elements.push_back(StringToJson(v.strings[i])); break;
      case GgufValueType::kArray: elements.push_back(GgufValueToJson(v.arrays[i])); break;
      case GgufValueType::kBool: elements.push_back(v.raw[i] != 0); break;
      case GgufValueType::kFloat32:
      case GgufValueType::kFloat64: elements.push_back(FloatToJson(v.FloatElement(i))); break;
      case GgufValueType::kUint64: elements.push_back(LoadLE<uint64_t>(v.raw.data() + i * 8)); break;
      default: elements.push_back(v.IntElement(i)); break;
    }
  }
  j["value"] = std::move(elements);
  return j;
}

absl::StatusOr<GgufValue> GgufValueFromJson(const json& j) { return FromJsonAtDepth(j, 0); }

}  // namespace octo
