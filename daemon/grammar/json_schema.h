// A JSON Schema as a grammar (GBNF, grammar.h): every text the grammar
// matches is JSON the schema accepts, so a constrained reply validates.
//
// Covered:
//   type (a name or a list of names), enum, const, anyOf, oneOf (as anyOf:
//     the alternatives the converters of the SDKs write are disjoint),
//     allOf with one member, $ref to "#/$defs/NAME" or "#/definitions/NAME"
//     (recursive too), an empty or `true` schema (any JSON value);
//   object: properties (written in the schema's order), required (the
//     others optional), additionalProperties false, true or a schema (extra
//     members after the named ones);
//   array: items, prefixItems, minItems, maxItems;
//   string: minLength, maxLength, format date, time, date-time and uuid,
//     pattern (regex_grammar.h: an ECMAScript subset, not anchored unless ^ $);
//   integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum;
//   number: minimum and maximum that are whole numbers (no exponent then);
//   boolean, null.
// Annotations (title, description, default, examples, $schema, $id,
// $comment, deprecated, readOnly, writeOnly) are ignored. Any other keyword
// would be dropped silently, so it is INVALID_ARGUMENT naming the keyword
// and where it is ("#/properties/age: multipleOf is not supported").
// Whitespace between tokens is bounded (at most 8 characters).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace octo {

// Limits (INVALID_ARGUMENT names the one passed).
inline constexpr int kMaxSchemaDepth = 64;        // nested schemas
inline constexpr int kMaxSchemaRepeat = 1000;     // minItems, maxItems, minLength, maxLength

// `schema` ordered as it was written: properties come in that order.
absl::StatusOr<std::string> JsonSchemaToGrammar(const nlohmann::ordered_json& schema);

}  // namespace octo
