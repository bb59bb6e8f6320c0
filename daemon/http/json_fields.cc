#include "daemon/http/json_fields.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "daemon/http/http_status.h"
#include "storage/status_macros.h"

namespace octo {

absl::StatusOr<nlohmann::json> ParseJsonObject(absl::string_view body) {
  OCTO_ASSIGN_OR_RETURN(nlohmann::json value, ParseBoundedJson(body, "the body"));
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("the body must be a JSON object, not ", JsonTypeName(value)));
  }
  return value;
}

std::string JsonTypeName(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "a boolean";
    default: return "a number";
  }
}

const nlohmann::json* FieldReader::Find(absl::string_view key) const {
  const auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::Status FieldReader::Error(absl::string_view key, absl::string_view problem) const {
  return WithParam(absl::InvalidArgumentError(absl::StrCat(Name(key), ": ", problem)), Name(key));
}

absl::Status FieldReader::String(absl::string_view key, std::string* out) const {
  const nlohmann::json* value = Find(key);
  if (value == nullptr) return absl::OkStatus();
  if (!value->is_string()) return Error(key, absl::StrCat("expected a string, got ", JsonTypeName(*value)));
  *out = value->get<std::string>();
  return absl::OkStatus();
}

absl::Status FieldReader::Bool(absl::string_view key, bool* out) const {
  const nlohmann::json* value = Find(key);
  if (value == nullptr) return absl::OkStatus();
  if (!value->is_boolean()) return Error(key, absl::StrCat("expected true or false, got ", JsonTypeName(*value)));
  *out = value->get<bool>();
  return absl::OkStatus();
}

absl::Status FieldReader::Number(absl::string_view key, double* out) const {
  const nlohmann::json* value = Find(key);
  if (value == nullptr) return absl::OkStatus();
  if (!value->is_number()) return Error(key, absl::StrCat("expected a number, got ", JsonTypeName(*value)));
  const double number = value->get<double>();
  if (!std::isfinite(number)) return Error(key, "expected a finite number");
  *out = number;
  return absl::OkStatus();
}

absl::Status FieldReader::Integer(absl::string_view key, int64_t min, int64_t max, int64_t* out) const {
  const nlohmann::json* value = Find(key);
  if (value == nullptr) return absl::OkStatus();
  const auto range = [&] {
    return Error(key, absl::StrCat(JsonPreview(*value), " is out of range [", min, ", ", max, "]"));
  };
  if (value->is_number_unsigned()) {
    const uint64_t number = value->get<uint64_t>();
    if (number > static_cast<uint64_t>(max)) return range();
    *out = static_cast<int64_t>(number);
  } else if (value->is_number_integer()) {
    *out = value->get<int64_t>();
  } else if (value->is_number_float() && std::nearbyint(value->get<double>()) == value->get<double>() &&
             std::fabs(value->get<double>()) < 9e15) {
    *out = static_cast<int64_t>(value->get<double>());  // 3.0 from a client that only has doubles
  } else {
    return Error(key, absl::StrCat("expected an integer, got ",
                                   value->is_number() ? JsonPreview(*value) : JsonTypeName(*value)));
  }
  if (*out < min || *out > max) return range();
  return absl::OkStatus();
}

absl::Status FieldReader::Integer(absl::string_view key, int32_t min, int32_t max, int32_t* out) const {
  int64_t wide = *out;
  const absl::Status status = Integer(key, int64_t{min}, int64_t{max}, &wide);
  if (status.ok()) *out = static_cast<int32_t>(wide);
  return status;
}

absl::Status FieldReader::TokenIds(absl::string_view key, std::vector<int32_t>* out) const {
  const nlohmann::json* value = Find(key);
  return value == nullptr ? absl::OkStatus() : TokenIds(key, *value, out);
}

absl::Status FieldReader::TokenIds(absl::string_view key, const nlohmann::json& value,
                                   std::vector<int32_t>* out) const {
  if (!value.is_array()) return Error(key, absl::StrCat("expected an array of token ids, got ", JsonTypeName(value)));
  std::vector<int32_t> ids;
  for (size_t i = 0; i < value.size(); ++i) {
    const nlohmann::json& id = value[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > kMaxJsonInt32) {
      return Error(key, absl::StrCat("item ", i, ": expected a token id, got ", JsonPreview(id)));
    }
    ids.push_back(id.get<int32_t>());
  }
  *out = std::move(ids);
  return absl::OkStatus();
}

absl::Status FieldReader::Strings(absl::string_view key, std::vector<std::string>* out) const {
  const nlohmann::json* value = Find(key);
  if (value == nullptr) return absl::OkStatus();
  if (value->is_string()) {
    *out = {value->get<std::string>()};
    return absl::OkStatus();
  }
  if (!value->is_array()) {
    return Error(key, absl::StrCat("expected a string or an array of strings, got ", JsonTypeName(*value)));
  }
  std::vector<std::string> strings;
  for (size_t i = 0; i < value->size(); ++i) {
    if (!(*value)[i].is_string()) {
      return Error(key, absl::StrCat("item ", i, ": expected a string, got ", JsonTypeName((*value)[i])));
    }
    strings.push_back((*value)[i].get<std::string>());
  }
  *out = std::move(strings);
  return absl::OkStatus();
}

absl::Status FieldReader::Unsupported(absl::string_view key, absl::string_view why) const {
  return Error(key, absl::StrCat("not supported by octod (", why, ")"));
}

absl::Status FieldReader::Require(absl::string_view key) const {
  if (Find(key) == nullptr) return Error(key, "required");
  return absl::OkStatus();
}

}  // namespace octo
