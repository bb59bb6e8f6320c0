// JSON from outside (HTTP bodies, manifest.json) parsed within stated
// limits, and client values described in error messages without echoing
// them whole.
//
// nlohmann's parser is iterative, but much of what follows a parse is not:
// dump(), copies and comparisons recurse as deep as the value nests, and a
// number that overflows a double throws out_of_range where callers expect
// parse_error. ParseBoundedJson refuses a value nested deeper than
// max_depth before any of that runs, turns every parse failure into a
// Status (it never throws, bad_alloc aside), and keeps its messages short.
// llama-server caps its JSON nesting at 64 for the same reason.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace octo {

// The deepest nesting of arrays and objects accepted: [[1]] is depth 2.
inline constexpr int kMaxJsonDepth = 64;
// Client text quoted in an error message is cut to this many bytes.
inline constexpr size_t kMaxQuotedBytes = 64;

// `text` as one JSON value. INVALID_ARGUMENT "<what> is not valid JSON:
// <where and why>" (a number too large for a double is one such defect) or
// "<what> nests arrays and objects deeper than <max_depth> levels". Never
// recurses on the input and never throws (bad_alloc aside).
absl::StatusOr<nlohmann::json> ParseBoundedJson(absl::string_view text, absl::string_view what,
                                                int max_depth = kMaxJsonDepth);

// `text` cut to at most `max_bytes` at a character boundary, in single
// quotes, with "..." after the quote when it was cut: safe to put in an
// error message whatever a client sent.
std::string QuotePrefix(absl::string_view text, size_t max_bytes = kMaxQuotedBytes);

// A short description of a client's JSON value for an error message: a
// number, boolean or null as written, a string as QuotePrefix gives it, an
// array or object by its kind and size ("an array of 3 items"). Never
// recurses, never throws.
std::string JsonPreview(const nlohmann::json& value);

}  // namespace octo
