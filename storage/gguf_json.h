// GGUF metadata values as JSON, for manifest.json: each value is an object
// {"type": "u32", "value": 7}; arrays are {"type": "arr", "element_type":
// "str", "value": [...]}. The encoding keeps every type exactly, so the
// daemon sees the tokenizer as the GGUF had it. A string that is not valid
// UTF-8 (JSON cannot hold it) is written as {"hex": "..."} in its place.
#pragma once

#include "storage/utf8.h"  // IsValidUtf8, used by callers of these helpers

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "storage/gguf_value.h"

namespace octo {

nlohmann::json GgufValueToJson(const GgufValue& value);
// INVALID_ARGUMENT naming what is wrong (type name, range, element).
absl::StatusOr<GgufValue> GgufValueFromJson(const nlohmann::json& j);



}  // namespace octo
