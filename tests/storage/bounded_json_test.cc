// ParseBoundedJson: the depth limit, numbers past a double, short messages
// whatever the input; QuotePrefix and JsonPreview never echo a value whole.
#include "storage/bounded_json.h"

#include <string>

#include "gtest/gtest.h"

namespace octo {
namespace {

using nlohmann::json;

std::string Nested(int depth, const std::string& open = "[", const std::string& close = "]",
                   const std::string& inner = "1") {
  std::string text;
  for (int i = 0; i < depth; ++i) text += open;
  text += inner;
  for (int i = 0; i < depth; ++i) text += close;
  return text;
}

TEST(BoundedJsonTest, ParsesWhatNlohmannParses) {
  const std::string text =
      R"({"a": [1, -2, 3.5, 18446744073709551615, "x\u00e9", true, null, {}], "b": {"c": []}, "a2": 0})";
  const absl::StatusOr<json> parsed = ParseBoundedJson(text, "the body");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, json::parse(text));
}

TEST(BoundedJsonTest, DuplicateKeysKeepTheLastValueAsNlohmannDoes) {
  const absl::StatusOr<json> parsed = ParseBoundedJson(R"({"k": 1, "k": [2]})", "x");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, json::parse(R"({"k": [2]})"));
}

TEST(BoundedJsonTest, SixtyFourLevelsPassAndSixtyFiveAreRefused) {
  EXPECT_TRUE(ParseBoundedJson(Nested(kMaxJsonDepth), "the body").ok());
  EXPECT_TRUE(ParseBoundedJson(Nested(kMaxJsonDepth, "{\"k\":", "}"), "the body").ok());
  for (const std::string& text : {Nested(kMaxJsonDepth + 1), Nested(kMaxJsonDepth + 1, "{\"k\":", "}"),
                                  Nested(1000000), Nested(40, "[{\"a\":", "}]")}) {
    const absl::StatusOr<json> parsed = ParseBoundedJson(text, "the body");
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), "the body nests arrays and objects deeper than 64 levels");
  }
}

TEST(BoundedJsonTest, TheLimitIsTheCallers) {
  EXPECT_TRUE(ParseBoundedJson(Nested(3), "x", 3).ok());
  EXPECT_FALSE(ParseBoundedJson(Nested(4), "x", 3).ok());
}

TEST(BoundedJsonTest, NumbersPastADoubleAreAnErrorNotAnException) {
  for (const std::string text : {"1e999", "-1e400", "[0, 1E+309]", R"({"t": 2e308})"}) {
    const absl::StatusOr<json> parsed = ParseBoundedJson(text, "the body");
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("number overflow"), std::string::npos) << parsed.status();
  }
  // Integers past 64 bits are doubles, as JSON allows; the field readers range-check them.
  const absl::StatusOr<json> big = ParseBoundedJson("123456789012345678901234567890", "x");
  ASSERT_TRUE(big.ok());
  EXPECT_TRUE(big->is_number_float());
}

TEST(BoundedJsonTest, SyntaxErrorsSayWhereAndQuoteAShortPrefix) {
  const absl::StatusOr<json> parsed = ParseBoundedJson("{\"a\": tru}", "the body");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("the body is not valid JSON: parse error at line 1, column 10"),
            std::string::npos)
      << parsed.status();
  // A string that never ends is read whole as the last token: the message quotes a prefix.
  const std::string unterminated = "\"" + std::string(1 << 20, 'a');
  const absl::StatusOr<json> open = ParseBoundedJson(unterminated, "the body");
  ASSERT_FALSE(open.ok());
  EXPECT_LT(open.status().message().size(), 400u) << open.status().message().substr(0, 400);
  // So does a number of a million digits that overflows.
  const absl::StatusOr<json> digits = ParseBoundedJson("1" + std::string(1 << 20, '0'), "the body");
  ASSERT_FALSE(digits.ok());
  EXPECT_LT(digits.status().message().size(), 400u);
  EXPECT_FALSE(ParseBoundedJson("", "the body").ok());
  EXPECT_FALSE(ParseBoundedJson("{} {}", "the body").ok());
  EXPECT_FALSE(ParseBoundedJson("\"\xff\"", "the body").ok()) << "invalid UTF-8 in a string";
  EXPECT_FALSE(ParseBoundedJson("\"\\ud800\"", "the body").ok()) << "a lone surrogate";
}

TEST(BoundedJsonTest, QuotePrefixCutsAtACharacterAndMarksTheCut) {
  EXPECT_EQ(QuotePrefix("abc"), "'abc'");
  EXPECT_EQ(QuotePrefix(std::string(100, 'x'), 4), "'xxxx'...");
  EXPECT_EQ(QuotePrefix("ab\xc3\xa9", 3), "'ab'...") << "é is not split";
  EXPECT_EQ(QuotePrefix("a\xff"), "'a\xef\xbf\xbd'") << "invalid bytes become U+FFFD";
}

TEST(BoundedJsonTest, JsonPreviewDescribesWithoutRecursing) {
  EXPECT_EQ(JsonPreview(json(3)), "3");
  EXPECT_EQ(JsonPreview(json(-3)), "-3");
  EXPECT_EQ(JsonPreview(json(2.5)), "2.5");
  EXPECT_EQ(JsonPreview(json(true)), "true");
  EXPECT_EQ(JsonPreview(json(nullptr)), "null");
  EXPECT_EQ(JsonPreview(json("hi")), "'hi'");
  EXPECT_EQ(JsonPreview(json::array({1, 2})), "an array of 2 items");
  EXPECT_EQ(JsonPreview(json::object({{"a", 1}})), "an object of 1 key");
  // A value nested a million deep (built without parsing) is described by its top alone.
  json deep = 1;
  for (int i = 0; i < 1000000; ++i) {
    json outer = json::array();
    outer.push_back(std::move(deep));
    deep = std::move(outer);
  }
  EXPECT_EQ(JsonPreview(deep), "an array of 1 item");
}

}  // namespace
}  // namespace octo
