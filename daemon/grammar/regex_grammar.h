// A JSON Schema `pattern` (an ECMAScript regular expression) as a grammar
// for the inside of a JSON string: the characters a match may hold, written
// as JSON writes them (a quote as \", a backslash as \\).
//
// Covered: literals and escapes (\. \* \n \t ...), classes ([a-z], [^...],
// \d \w \s \D \W \S), ., groups ( ) and (?: ), |, and the quantifiers * + ?
// {m} {m,} {m,n} (lazy ones alike: the set of matches is the same). As JSON
// Schema says, a pattern is not anchored: a string must contain a match,
// unless the pattern starts with ^ and ends with $. Back-references,
// lookaround, word boundaries and anchors elsewhere than at the two ends are
// INVALID_ARGUMENT naming what is not supported. Control characters a class
// admits are left out of what may be written (the output stays a subset).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace octo {

inline constexpr size_t kMaxPatternBytes = 4096;

// The GBNF expression, over the characters of a JSON string's inside.
absl::StatusOr<std::string> JsonStringPattern(absl::string_view pattern);

}  // namespace octo
