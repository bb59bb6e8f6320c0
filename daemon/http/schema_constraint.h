// A request's JSON Schema constraint (OpenAI's response_format json_schema,
// llama-server's json_schema, Ollama's schema `format`) as the job's grammar.
//
// The field parsers read bodies into nlohmann::json, whose objects are
// sorted by key; a schema's properties must keep the order they were
// written in (a model writes "reasoning" before "answer" when asked to),
// so the schema is read again from the body text, in order.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace octo {

// The schema at `path` in the JSON `body` (already parsed once, so well
// formed) into *grammar. INVALID_ARGUMENT naming `field` (the param a 400
// names) when the schema cannot be honoured (json_schema.h).
absl::Status SchemaGrammar(absl::string_view body, const std::vector<std::string>& path, const std::string& field,
                           std::string* grammar);

}  // namespace octo
