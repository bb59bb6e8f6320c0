// One GGUF metadata value: a scalar, a string, or an array of them.
//
// Arrays keep their elements compactly (numeric elements as the raw
// little-endian bytes from the file) so a large vocabulary costs what it
// costs on disk, not eight times that.
#pragma once

#include <cstdint>
#include <string>

#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"

namespace octo {

// GGUF value type ids, as stored in the file.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
inline constexpr uint32_t kGgufValueTypeCount = 13;

// Short names used in messages and in manifest.json: "u8", "i32", "f32",
// "bool", "str", "arr", ...
absl::string_view GgufValueTypeName(GgufValueType type);
absl::StatusOr<GgufValueType> GgufValueTypeFromName(absl::string_view name);

// Bytes one element takes in the file; 0 for string and array (variable).
uint32_t GgufScalarSize(GgufValueType type);
bool IsGgufInteger(GgufValueType type);
bool IsGgufFloat(GgufValueType type);

struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;

  // Scalars: exactly one of these is meaningful, chosen by `type`.
  uint64_t uint_value = 0;  // u8, u16, u32, u64, bool
  int64_t int_value = 0;    // i8, i16, i32, i64
  double float_value = 0;   // f32, f64
  std::string string_value; // str

  // Arrays (type == kArray): element type and count, and the elements in
  // the one container that fits the element type.
  GgufValueType element_type = GgufValueType::kUint8;
  uint64_t count = 0;
  std::vector<uint8_t> raw;               // numeric/bool elements, little-endian
  std::vector<std::string> strings;       // string elements
  std::vector<GgufValue> arrays;          // nested array elements

  // Scalar conversions with range checks; INVALID_ARGUMENT naming the
  // actual type when the value is not of a compatible kind.
  absl::StatusOr<uint64_t> AsUint64() const;  // any integer type, >= 0
  absl::StatusOr<int64_t> AsInt64() const;    // any integer type, in range
  absl::StatusOr<double> AsDouble() const;    // any integer or float type
  absl::StatusOr<bool> AsBool() const;
  absl::StatusOr<absl::string_view> AsString() const;

  // Element i of a numeric array as int64 (integer and bool elements; 0 for
  // floats) / double (any numeric element). Caller checks i < count.
  int64_t IntElement(uint64_t i) const;
  double FloatElement(uint64_t i) const;

  // Approximate heap bytes this value holds (for the parser's memory cap).
  uint64_t HeapBytes() const;

  // Builders, used by tests and tools.
  static GgufValue Uint(GgufValueType type, uint64_t v);
  static GgufValue Int(GgufValueType type, int64_t v);
  static GgufValue Float(GgufValueType type, double v);
  static GgufValue Bool(bool v);
  static GgufValue String(std::string v);
};

// A human-readable rendering for `inspect`: scalars in full, arrays as
// "[N x type] first, elements, ..." with at most `max_elements` shown.
std::string GgufValueToDisplay(const GgufValue& value, int max_elements);

}  // namespace octo
