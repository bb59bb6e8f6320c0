#include "daemon/http/schema_constraint.h"

#include "absl/strings/str_cat.h"
#include "daemon/grammar/json_schema.h"
#include "daemon/http/http_status.h"
#include "nlohmann/json.hpp"

namespace octo {

absl::Status SchemaGrammar(absl::string_view body, const std::vector<std::string>& path, const std::string& field,
                           std::string* grammar) {
  const nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  const nlohmann::ordered_json* at = &parsed;
  for (const std::string& key : path) {
    if (!at->is_object() || !at->contains(key)) {
      return WithParam(absl::InvalidArgumentError(absl::StrCat(field, ": expected a JSON Schema")), field);
    }
    at = &(*at)[key];
  }
  absl::StatusOr<std::string> converted = JsonSchemaToGrammar(*at);
  if (!converted.ok()) {
    return WithParam(absl::InvalidArgumentError(absl::StrCat(field, ": ", converted.status().message())), field);
  }
  *grammar = *std::move(converted);
  return absl::OkStatus();
}

}  // namespace octo
