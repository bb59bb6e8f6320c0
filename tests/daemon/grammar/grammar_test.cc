// GBNF text into a Grammar: what each construct becomes, and a clear error
// (with line and column) for every text a matcher could not run.
#include "daemon/grammar/grammar.h"

#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace octo {
namespace {

TEST(GrammarTest, LiteralsClassesAndReferencesBecomeElements) {
  absl::StatusOr<Grammar> g = Grammar::Parse(R"(
    # a comment, then the root
    root ::= "ab" [x-z0-9] value | .
    value ::= [^"\\] "\u00e9\x41\n"
  )");
  ASSERT_TRUE(g.ok()) << g.status();
  const GrammarRule& root = g->rules[g->root];
  EXPECT_EQ(root.name, "root");
  ASSERT_EQ(root.alternatives.size(), 2u);
  const GrammarAlternative& first = root.alternatives[0];
  ASSERT_EQ(first.size(), 4u);
  EXPECT_TRUE(first[0].Matches('a'));
  EXPECT_FALSE(first[0].Matches('b'));
  EXPECT_TRUE(first[2].Matches('y'));
  EXPECT_TRUE(first[2].Matches('5'));
  EXPECT_FALSE(first[2].Matches('a'));
  EXPECT_EQ(first[3].kind, GrammarElement::Kind::kRule);
  EXPECT_EQ(g->rules[first[3].rule].name, "value");
  EXPECT_TRUE(root.alternatives[1][0].Matches(0x1F600)) << ". is any code point";
  const GrammarAlternative& value = g->rules[g->Find("value")].alternatives[0];
  ASSERT_EQ(value.size(), 4u);
  EXPECT_FALSE(value[0].Matches('"'));
  EXPECT_FALSE(value[0].Matches('\\'));
  EXPECT_TRUE(value[0].Matches('q'));
  EXPECT_TRUE(value[1].Matches(0xE9));
  EXPECT_TRUE(value[2].Matches('A'));
  EXPECT_TRUE(value[3].Matches('\n'));
}

TEST(GrammarTest, RulesMaySpanLinesAndGroupsRepeat) {
  absl::StatusOr<Grammar> g = Grammar::Parse("root ::= (\"a\" |\n  \"b\")+ x{2,4} y* z\nx ::= \"x\"\ny ::= \"y\"\nz ::= \"z\"?");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->rules[g->root].alternatives.size(), 1u);
  EXPECT_GE(g->rules.size(), 6u) << "groups and repetitions are rules of their own";
}

TEST(GrammarTest, BadTextIsRefusedSayingWhereAndWhat) {
  struct Case {
    std::string text, words;
  };
  const Case cases[] = {
      {"root ::= undefined-rule", "line 1, column 10: the rule 'undefined-rule' is not defined"},
      {"start ::= \"a\"", "no rule 'root'"},
      {"root ::= \"a\n", "a literal is not closed"},
      {"root ::= [a-", "not closed with ]"},
      {"root ::= [z-a]", "ends below where it starts"},
      {"root ::= \"\\q\"", "unknown escape \\q"},
      {"root ::= \"\\x4\"", "needs 2 hex digits"},
      {"root ::= \"\\U00110000\"", "above U+10FFFF"},
      {"root ::= (\"a\"", "not closed with )"},
      {"root ::= \"a\"{3,1}", "m <= n"},
      {"root ::= \"a\"{1001}", "above 1000"},
      {"root ::= \"a\"{", "needs a count"},
      {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: the rule 'root' is defined twice"},
      {"root ::= root \"a\" | \"b\"", "'root' is left-recursive"},
      {"root ::= x\nx ::= y? x \"a\"\ny ::= \"b\"", "'x' is left-recursive"},
      {"root ::= y*\ny ::= \"y\"?", "a repetition of something that may match nothing"},
      {"root = \"a\"", "expected ::="},
      {"root ::= \"a\" ;", "unexpected ';'"},
      {"root ::= \"\xff\"", "not valid UTF-8"},
      {std::string(100, '(') + "root", "expected a rule name"},
      {"root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')'), "nest deeper than 64"},
      {"root ::= \"" + std::string(kMaxGrammarBytes, 'a') + "\"", "bytes; at most"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Grammar> g = Grammar::Parse(c.text);
    ASSERT_FALSE(g.ok()) << c.text.substr(0, 80);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(g.status().message(), c.words)) << c.text.substr(0, 80) << " -> " << g.status();
  }
}

TEST(GrammarTest, TooManyRulesAreRefused) {
  // Each {0,1000} makes a thousand rules.
  std::string text = "root ::=";
  for (int i = 0; i < 30; ++i) absl::StrAppend(&text, " \"a\"{0,1000}");
  absl::StatusOr<Grammar> g = Grammar::Parse(text);
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(absl::StrContains(g.status().message(), "more than 20000 rules")) << g.status();
}

}  // namespace
}  // namespace octo
