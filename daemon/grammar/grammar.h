// A context-free grammar over Unicode code points, the constraint a
// generation can be held to (JSON, a JSON Schema, a tool call), and its
// text form: GBNF as llama.cpp writes it.
//
//   root   ::= "{" ws pair ("," ws pair)* "}"
//   pair   ::= string ":" ws [0-9]+          # a comment
//   string ::= "\"" [^"\\]* "\""
//   ws     ::= [ \t\n]{0,8}
//
// Literals in double quotes, character classes in brackets (ranges, ^ to
// negate), `.` for any code point, rule names, ( ) groups, | alternatives,
// and the postfix operators * + ? {m} {m,} {m,n}. Escapes: \n \r \t \\ \"
// \[ \] \- \xHH \uHHHH \UHHHHHHHH. The rule `root` is where a match starts.
//
// Parse() desugars groups and repetitions into rules of their own, so a
// Grammar is rules of alternatives of plain elements: a character set or a
// reference to a rule. It refuses what a matcher could not run: an
// undefined rule, left recursion (a rule that can reach itself without
// consuming a code point), and input past the named limits.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace octo {

// Limits on a grammar's text and shape (INVALID_ARGUMENT names the one passed).
inline constexpr size_t kMaxGrammarBytes = 256 << 10;
inline constexpr size_t kMaxGrammarRules = 20000;  // after desugaring
inline constexpr int kMaxGrammarNesting = 64;      // ( ) depth
inline constexpr int kMaxGrammarRepeat = 1000;     // m and n of {m,n}

struct GrammarElement {
  enum class Kind : uint8_t { kChars, kRule };
  Kind kind = Kind::kChars;
  uint32_t rule = 0;  // kRule: the rule's index
  // kChars: inclusive code point ranges; the element matches a code point
  // inside one of them, or outside all of them when `negated`.
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  bool negated = false;

  bool Matches(uint32_t code_point) const;
};

// One way a rule matches: its elements in order (empty: the empty string).
using GrammarAlternative = std::vector<GrammarElement>;

struct GrammarRule {
  std::string name;  // as written; generated rules are "name-N"
  std::vector<GrammarAlternative> alternatives;
};

struct Grammar {
  std::vector<GrammarRule> rules;
  uint32_t root = 0;
  std::string source;  // the text it was parsed from: two parses of one text are one grammar

  // Parses GBNF text (above). INVALID_ARGUMENT says what is wrong and where
  // ("line 3, column 14: ...").
  static absl::StatusOr<Grammar> Parse(absl::string_view text);

  // The rule named `name`, or -1.
  int Find(absl::string_view name) const;
};

}  // namespace octo
