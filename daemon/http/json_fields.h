// Reading an HTTP request's JSON body, with an error that names the field.
//
// Every reader leaves *out untouched when the key is absent or null, so a
// caller sets its defaults first and reads over them. A value of the wrong
// type or out of range is INVALID_ARGUMENT "KEY: expected ..., got ..."
// carrying KEY as its param (http_status.h). Unknown keys are ignored, as
// the OpenAI and Ollama servers do: clients send fields we do not use.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "storage/bounded_json.h"

namespace octo {

inline constexpr int32_t kMaxJsonInt32 = std::numeric_limits<int32_t>::max();

// The body as a JSON object, parsed within ParseBoundedJson's limits (no
// nesting past kMaxJsonDepth, no number past a double). INVALID_ARGUMENT
// "the body is not valid JSON: <where>", "the body nests ... deeper than
// 64 levels" or "the body must be a JSON object".
absl::StatusOr<nlohmann::json> ParseJsonObject(absl::string_view body);

// "a string", "an array", ... for messages.
std::string JsonTypeName(const nlohmann::json& value);

class FieldReader {
 public:
  // `object` must be a JSON object and outlive the reader; `prefix` is put
  // before each key in messages ("options.").
  explicit FieldReader(const nlohmann::json& object, std::string prefix = "")
      : object_(object), prefix_(std::move(prefix)) {}

  // The value at key, or nullptr when absent or null.
  const nlohmann::json* Find(absl::string_view key) const;
  // prefix + key: what messages call the field.
  std::string Name(absl::string_view key) const { return prefix_ + std::string(key); }
  // INVALID_ARGUMENT "NAME: problem" with NAME as the param.
  absl::Status Error(absl::string_view key, absl::string_view problem) const;

  absl::Status String(absl::string_view key, std::string* out) const;
  absl::Status Bool(absl::string_view key, bool* out) const;
  // A finite number.
  absl::Status Number(absl::string_view key, double* out) const;
  // An integer (a number with no fraction) in [min, max].
  absl::Status Integer(absl::string_view key, int64_t min, int64_t max, int64_t* out) const;
  absl::Status Integer(absl::string_view key, int32_t min, int32_t max, int32_t* out) const;
  // A string, or an array of strings.
  absl::Status Strings(absl::string_view key, std::vector<std::string>* out) const;
  // An array of token ids (integers in [0, 2^31 - 1]): "NAME: item I:
  // expected a token id, got V" for the first that is not one.
  absl::Status TokenIds(absl::string_view key, std::vector<int32_t>* out) const;
  // The same of `value`, found in the field `key` (a list in it).
  absl::Status TokenIds(absl::string_view key, const nlohmann::json& value, std::vector<int32_t>* out) const;
  // A key that must be present (and not null).
  absl::Status Require(absl::string_view key) const;
  // "NAME: not supported by octod (why)": a field octod refuses rather than
  // ignores, because the answer would not be what was asked.
  absl::Status Unsupported(absl::string_view key, absl::string_view why) const;

 private:
  const nlohmann::json& object_;
  std::string prefix_;
};

}  // namespace octo
