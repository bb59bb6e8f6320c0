// The matcher against what a user would check by hand: JSON-shaped text
// accepted or refused token by token, characters split across tokens,
// ending only on a whole match, rollback to an earlier token, and a mask
// that is exactly the tokens Accept would take. An independent check: for a
// regular grammar, every string up to four characters is accepted exactly
// when std::regex matches it.
#include "daemon/grammar/grammar_matcher.h"
#include "daemon/grammar/think_first.h"

#include <memory>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace octo {
namespace {

// A small JSON: objects, arrays, strings, integers, true/false/null.
constexpr char kJson[] = R"(
  root   ::= value
  value  ::= object | array | string | number | "true" | "false" | "null"
  object ::= "{" ws ( pair ( "," ws pair )* )? "}"
  pair   ::= string ws ":" ws value ws
  array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
  string ::= "\"" ( [^"\\] | "\\" ["\\/nt] )* "\""
  number ::= "-"? [0-9]+
  ws     ::= [ \n]{0,4}
)";

std::shared_ptr<const Grammar> Parse(const std::string& text) {
  absl::StatusOr<Grammar> g = Grammar::Parse(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return std::make_shared<const Grammar>(g.ok() ? *std::move(g) : Grammar{});
}

// Feeds `tokens` one by one; the index of the first one refused, or -1.
int Feed(GrammarMatcher& m, const std::vector<std::string>& tokens) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!m.Accept(tokens[i])) return static_cast<int>(i);
  }
  return -1;
}

TEST(GrammarMatcherTest, JsonIsAcceptedTokenByTokenAndEndsOnlyWhenWhole) {
  auto g = Parse(kJson);
  GrammarMatcher m(g);
  EXPECT_FALSE(m.CanEnd());
  ASSERT_EQ(Feed(m, {"{\"", "name", "\": ", "[1", ", -2", ", \"x\\n", "\"]", " "}), -1);
  EXPECT_FALSE(m.CanEnd()) << "the object is open";
  EXPECT_FALSE(m.Accept("x")) << "not JSON here";
  EXPECT_FALSE(m.Accept("}x")) << "refused whole: the state is unchanged";
  ASSERT_TRUE(m.Accept("}"));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.Accept(" ")) << "nothing may follow the value";
  EXPECT_EQ(m.accepted(), 9);
}

TEST(GrammarMatcherTest, RefusedTextLeavesTheStateAsItWas) {
  GrammarMatcher m(Parse(kJson));
  EXPECT_EQ(Feed(m, {"[", "tru", "x"}), 2);
  EXPECT_TRUE(m.Accept("e]"));
  EXPECT_TRUE(m.CanEnd());
}

TEST(GrammarMatcherTest, ACharacterSplitAcrossTokensIsOneCodePoint) {
  GrammarMatcher m(Parse("root ::= \"\\u00e9\"+ \"!\""));  // é is C3 A9
  EXPECT_TRUE(m.Accept("\xC3"));
  EXPECT_FALSE(m.CanEnd()) << "half a character";
  EXPECT_FALSE(m.Allows("!")) << "a new character before the last one ends";
  EXPECT_TRUE(m.Accept("\xA9\xC3"));
  EXPECT_FALSE(m.Allows("\xAA")) << "U+00EA is not in the grammar";
  EXPECT_TRUE(m.Accept("\xA9!"));
  EXPECT_TRUE(m.CanEnd());
  GrammarMatcher ascii(Parse("root ::= [a-z]+"));
  EXPECT_FALSE(ascii.Allows("\xC3")) << "no two-byte character can follow: refused at its first byte";
  EXPECT_FALSE(ascii.Allows("\xFF"));
  // Overlong forms and surrogates spell no character, even one the grammar takes.
  GrammarMatcher digits(Parse("root ::= [0-9-]+ | [\\u0000-\\U0010FFFF]"));
  EXPECT_FALSE(digits.Allows("\xE0\x80\xB2")) << "an overlong '2'";
  EXPECT_FALSE(digits.Allows("\xC0\xAD")) << "an overlong '-'";
  EXPECT_FALSE(digits.Allows("\xED\xA0\x80")) << "a surrogate";
  EXPECT_TRUE(digits.Allows("\xE2\x82\xAC")) << "the euro sign";
  // A lead byte that could only begin an overlong digit is refused at once:
  // no continuation could finish it into one.
  GrammarMatcher only_digits(Parse("root ::= [0-9]+"));
  EXPECT_FALSE(only_digits.Allows("\xE0"));
  EXPECT_FALSE(only_digits.Allows("\xC0"));
  GrammarMatcher any(Parse("root ::= .*"));
  EXPECT_FALSE(any.Allows("\xED\xA0")) << "only a surrogate can follow";
  EXPECT_TRUE(any.Allows("\xED\x9F"));
}

TEST(GrammarMatcherTest, RollbackReturnsToAnEarlierToken) {
  GrammarMatcher m(Parse(kJson));
  ASSERT_EQ(Feed(m, {"[1", ",", "2", "]"}), -1);
  EXPECT_TRUE(m.CanEnd());
  ASSERT_TRUE(m.Rollback(2).ok());  // back to "[1,"
  EXPECT_EQ(m.accepted(), 2);
  EXPECT_FALSE(m.CanEnd());
  EXPECT_FALSE(m.Allows("]")) << "a value must follow the comma";
  ASSERT_EQ(Feed(m, {"\"a\"", "]"}), -1);
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.Rollback(5).ok());
  EXPECT_FALSE(m.Rollback(-1).ok());
}

TEST(GrammarMatcherTest, BoundedRepetitionsCountExactly) {
  GrammarMatcher m(Parse("root ::= \"a\"{2,3} \"b\"{2}"));
  EXPECT_FALSE(m.Allows("ab"));
  EXPECT_TRUE(m.Allows("aab"));
  EXPECT_TRUE(m.Allows("aaab"));
  EXPECT_FALSE(m.Allows("aaaa"));
  ASSERT_TRUE(m.Accept("aabb"));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.Allows("b"));
}

TEST(GrammarMatcherTest, TheMaskIsExactlyTheTokensAcceptWouldTake) {
  // A vocabulary of fragments: JSON pieces, words, multi-byte halves, and
  // an empty (special) token that is never allowed.
  std::vector<std::string> vocab = {"{", "}", "[", "]", "\"", "\":", ", ", "{\"", "\"}", "true", "tru", "e",
                                    "null", "1", "23", "-", " ", "\n", "a", "ab", "\\", "\\n", "\xC3", "\xA9",
                                    "\xC3\xA9", "x", "", "]]", "0]", ":"};
  TokenTrie trie(vocab);
  EXPECT_EQ(trie.vocab_size(), vocab.size());
  auto g = Parse(kJson);
  std::mt19937 rng(7);
  GrammarMatcher m(g);
  std::vector<uint8_t> allowed;
  for (int step = 0; step < 200; ++step) {
    m.FillMask(trie, allowed);
    std::vector<size_t> ok;
    for (size_t id = 0; id < vocab.size(); ++id) {
      const bool want = !vocab[id].empty() && m.Allows(vocab[id]);
      ASSERT_EQ(allowed[id] == 1, want) << "token '" << vocab[id] << "' at step " << step;
      if (want) ok.push_back(id);
    }
    if (ok.empty() || m.CanEnd()) {
      m = GrammarMatcher(g);  // a whole value, or a dead end of this vocabulary: start again
      continue;
    }
    ASSERT_TRUE(m.Accept(vocab[ok[rng() % ok.size()]]));
  }
}

TEST(GrammarMatcherTest, MatchersOfOneGrammarShareMasks) {
  const std::vector<std::string> vocab = {"{", "}", "\"", "a", "\":", " ", "1", "]"};
  const TokenTrie trie(vocab);
  MaskCache shared(16);
  std::vector<uint8_t> first, second, alone;
  GrammarMatcher a(Parse(kJson));
  a.FillMask(trie, first, &shared);
  EXPECT_EQ(shared.hits(), 0u);
  GrammarMatcher b(Parse(kJson));  // the same text parsed again: the same grammar
  b.FillMask(trie, second, &shared);
  EXPECT_EQ(shared.hits(), 1u);
  EXPECT_EQ(first, second);
  GrammarMatcher other(Parse("root ::= \"}\""));
  other.FillMask(trie, alone, &shared);
  EXPECT_EQ(shared.hits(), 1u) << "another grammar's masks are its own";
  EXPECT_NE(alone, first);
}

// Every string over {a, b, c} of up to four characters: the matcher agrees
// with std::regex on an equivalent expression.
TEST(GrammarMatcherTest, ARegularGrammarAgreesWithStdRegex) {
  struct Case {
    const char* grammar;
    const char* regex;
  };
  const Case cases[] = {
      {"root ::= \"a\"+ \"b\"?", "a+b?"},
      {"root ::= ([ab] \"c\")* | \"ca\"", "([ab]c)*|ca"},
      {"root ::= x{1,2} [^a]\nx ::= \"ab\" | \"a\"", "(ab|a){1,2}[^a]"},
      {"root ::= (\"a\" | \"b\" \"c\"?){2,}", "(a|bc?){2,}"},
  };
  std::vector<std::string> strings = {""};
  for (int length = 1; length <= 4; ++length) {
    const size_t before = strings.size();
    for (size_t i = 0; i < before; ++i) {
      if (strings[i].size() != static_cast<size_t>(length - 1)) continue;
      for (const char c : {'a', 'b', 'c'}) strings.push_back(strings[i] + c);
    }
  }
  for (const Case& c : cases) {
    auto g = Parse(c.grammar);
    const std::regex re(c.regex);
    for (const std::string& s : strings) {
      GrammarMatcher m(g);
      const bool matched = m.Accept(s) && m.CanEnd();
      EXPECT_EQ(matched, std::regex_match(s, re)) << c.grammar << " on '" << s << "'";
    }
  }
}

// A reasoning model's constraint starts after its thought: the thought is
// any text up to the first "</think>" (checked against a direct reading on
// random texts made of the tag's pieces), and a reply without one matches
// the grammar alone.
TEST(ThinkFirst, TheConstraintHoldsAfterTheFirstCloseTag) {
  auto g = std::make_shared<const Grammar>(ThinkFirst(*Parse(R"(root ::= "{}")")));
  auto matches = [&](const std::string& text) {
    GrammarMatcher m(g);
    return m.Accept(text) && m.CanEnd();
  };
  EXPECT_TRUE(matches("{}"));
  EXPECT_TRUE(matches("<think>\nweigh it\n</think>\n\n{}"));
  EXPECT_TRUE(matches("\n<think>a < b, </thin </think>{}"));
  EXPECT_FALSE(matches("<think>x</think>not json"));
  EXPECT_FALSE(matches("<think>x</think>{}</think>{}"));
  EXPECT_FALSE(matches("<think>never closed {}"));
  const std::vector<std::string> pieces = {"<", "/", "t", "hink", ">", "x", "</think>", "<think>", "</", "\n"};
  std::mt19937 random(7);
  for (int i = 0; i < 3000; ++i) {
    std::string body;
    const int n = static_cast<int>(random() % 8);
    for (int k = 0; k < n; ++k) body += pieces[random() % pieces.size()];
    const std::string text = "<think>" + body + (random() % 2 ? "</think>{}" : "{}");
    // Direct: the thought ends at the first "</think>" after the opening
    // tag; up to 8 blanks may follow it.
    const size_t close = text.find("</think>", 7);
    std::string after = close == std::string::npos ? "" : text.substr(close + 8);
    const size_t blanks = std::min<size_t>(after.find_first_not_of(" \t\n"), 8);
    const bool expected = close != std::string::npos && after.substr(std::min(blanks, after.size())) == "{}";
    EXPECT_EQ(matches(text), expected) << text;
  }
}

}  // namespace
}  // namespace octo
