// JSON Schemas as grammars, over a corpus of the shapes clients send (the AI
// SDK's and zod's, Pydantic's, OpenAI's strict ones, recursive ones): every
// random text the grammar lets through parses and validates, for 20 seeds
// per schema; and the schemas it cannot honour are refused naming the
// keyword and where it is.
#include "daemon/grammar/json_schema.h"

#include <memory>
#include <regex>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "daemon/grammar/grammar_matcher.h"
#include "tests/daemon/grammar/schema_validator.h"

namespace octo {
namespace {

using json = nlohmann::ordered_json;

// Schemas every output of which must validate.
const char* const kAccepted[] = {
    // The AI SDK / zod: an object of required properties, no extras.
    R"j({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"number"}},"required":["name","age"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"})j",
    R"j({"type":"object","properties":{"recipe":{"type":"object","properties":{"name":{"type":"string"},"ingredients":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"amount":{"type":"string"}},"required":["name","amount"],"additionalProperties":false}},"steps":{"type":"array","items":{"type":"string"}}},"required":["name","ingredients","steps"],"additionalProperties":false}},"required":["recipe"],"additionalProperties":false})j",
    // zod optional and nullable members.
    R"j({"type":"object","properties":{"title":{"type":"string"},"note":{"type":["string","null"]},"tags":{"type":"array","items":{"type":"string"},"maxItems":3}},"required":["title"],"additionalProperties":false})j",
    // Only optional members (the empty object is valid).
    R"j({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"},"c":{"type":"null"}}})j",
    // Pydantic: title, description, $defs and $ref, enums.
    R"j({"$defs":{"Color":{"enum":["red","green","blue"],"title":"Color","type":"string"},"Item":{"properties":{"name":{"title":"Name","type":"string"},"color":{"$ref":"#/$defs/Color"},"count":{"default":1,"title":"Count","type":"integer","minimum":1,"maximum":99}},"required":["name","color"],"title":"Item","type":"object"}},"properties":{"items":{"items":{"$ref":"#/$defs/Item"},"title":"Items","type":"array","minItems":1}},"required":["items"],"title":"Order","type":"object"})j",
    // Pydantic Optional: anyOf with null.
    R"j({"properties":{"id":{"type":"integer"},"parent":{"anyOf":[{"type":"integer"},{"type":"null"}],"default":null}},"required":["id"],"type":"object"})j",
    // Recursive: a tree, by $defs and by the root.
    R"j({"$defs":{"Node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/Node"},"maxItems":2}},"required":["value"],"additionalProperties":false}},"$ref":"#/$defs/Node"})j",
    R"j({"type":"object","properties":{"name":{"type":"string","maxLength":8},"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["name","next"]})j",
    R"j({"definitions":{"expr":{"oneOf":[{"type":"integer","minimum":0,"maximum":9},{"type":"object","properties":{"op":{"enum":["+","*"]},"args":{"type":"array","items":{"$ref":"#/definitions/expr"},"minItems":2,"maxItems":2}},"required":["op","args"],"additionalProperties":false}]}},"$ref":"#/definitions/expr"})j",
    // Strings: lengths, formats, const.
    R"j({"type":"object","properties":{"code":{"type":"string","minLength":3,"maxLength":5},"day":{"type":"string","format":"date"},"at":{"type":"string","format":"date-time"},"t":{"type":"string","format":"time"},"id":{"type":"string","format":"uuid"},"kind":{"const":"event"}},"required":["code","day","at","t","id","kind"]})j",
    // Integers: ranges, negative and exclusive bounds.
    R"j({"type":"array","items":{"type":"integer","minimum":-250,"maximum":1234},"minItems":3,"maxItems":6})j",
    R"j({"type":"array","items":{"type":"integer","exclusiveMinimum":-1,"exclusiveMaximum":100}})j",
    R"j({"type":"array","items":{"type":"integer","minimum":17}})j",
    R"j({"type":"array","items":{"type":"integer","maximum":-3}})j",
    R"j({"type":"integer","minimum":1000,"maximum":1000})j",
    // Arrays: prefixItems (tuples), items false, bounds.
    R"j({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"},{"type":"boolean"}],"items":false,"minItems":2})j",
    R"j({"type":"array","prefixItems":[{"const":1}],"items":{"type":"string"},"minItems":1,"maxItems":3})j",
    R"j({"type":"array","minItems":2,"maxItems":2})j",
    // additionalProperties: a schema, or true.
    R"j({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],"additionalProperties":{"type":"number"}})j",
    R"j({"type":"object","additionalProperties":true})j",
    // Type lists, enums of mixed values, anything.
    R"j({"type":["integer","string","null"]})j",
    R"j({"enum":[1,"two",null,true,{"x":[1,2]}]})j",
    R"j({})j",
    R"j(true)j",
    // OpenAI's strict-mode function arguments, a tool call's shape.
    R"j({"type":"object","properties":{"location":{"type":"string","description":"City and country"},"unit":{"type":["string","null"],"enum":["celsius","fahrenheit",null]}},"required":["location","unit"],"additionalProperties":false})j",
    R"j({"type":"object","properties":{"name":{"const":"get_weather"},"arguments":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},"required":["name","arguments"]})j",
    // allOf of one (Pydantic's wrapper of a $ref), nullable (OpenAPI).
    R"j({"properties":{"pet":{"allOf":[{"$ref":"#/$defs/Pet"}],"description":"the pet"}},"required":["pet"],"$defs":{"Pet":{"type":"object","properties":{"kind":{"enum":["cat","dog"]}},"required":["kind"]}}})j",
    R"j({"type":"object","properties":{"n":{"type":"integer","nullable":true}},"required":["n"]})j",
    R"j({"type":"number"})j",
    // Numbers within whole bounds: a probability, a temperature, a price.
    R"j({"type":"object","properties":{"p":{"type":"number","minimum":0,"maximum":1},"celsius":{"type":"number","minimum":-40,"maximum":-2},"price":{"type":"number","minimum":3}},"required":["p","celsius","price"]})j",
    R"j({"type":"string"})j",
    // Patterns: anchored and not, classes, groups, escapes, a quote and a backslash.
    R"j({"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{3}-\\d{4}$"},"word":{"type":"string","pattern":"^(foo|bar)+baz?$"},"colour":{"type":"string","pattern":"colou?r"}},"required":["code","word","colour"]})j",
    R"j({"type":"array","items":{"type":"string","pattern":"^[^@\\s]+@[^@\\s]+\\.[a-z]{2,4}$"},"minItems":1,"maxItems":3})j",
    R"j({"type":"array","items":{"type":"string","pattern":"^\\+?[0-9 ()-]{7,15}$"}})j",
    R"j({"type":"array","items":{"type":"string","pattern":"^\"q\\\\[.]\\w*(?:x|y){1,2}?$"}})j",
};

struct Refused {
  const char* schema;
  const char* words;
};
const Refused kRefused[] = {
    {R"j({"type":"integer","multipleOf":3})j", "#: multipleOf is not supported"},
    {R"j({"type":"object","properties":{"a":{"type":"string","pattern":"^(a)\\1$"}}})j", "#/properties/a: pattern at 5: back-references are not supported"},
    {R"j({"type":"string","pattern":"a(?=b)"})j", "lookaround and named groups are not supported"},
    {R"j({"type":"string","pattern":"a^b"})j", "anchors are supported at the pattern's two ends only"},
    {R"j({"type":"string","pattern":"[a-"})j", "not closed with ]"},
    {R"j({"type":"string","pattern":"a{3,1}"})j", "m <= n"},
    {R"j({"type":"string","pattern":"\\bword"})j", "word boundaries"},
    {R"j({"type":"string","pattern":"a+","maxLength":3})j", "pattern beside format, minLength or maxLength"},
    {R"j({"type":"string","format":"email"})j", "format 'email' is not supported"},
    {R"j({"type":"number","minimum":0.5})j", "minimum on a number must be a whole number"},
    {R"j({"type":"number","exclusiveMaximum":1})j", "exclusiveMaximum on a number is not supported"},
    {R"j({"type":"array","uniqueItems":true})j", "uniqueItems is not supported"},
    {R"j({"allOf":[{"type":"object"},{"required":["a"]}]})j", "allOf is supported with one schema only"},
    {R"j({"$ref":"https://example.com/schema.json"})j", "does not name a schema"},
    {R"j({"$ref":"#/$defs/Missing"})j", "does not name a schema"},
    {R"j({"type":"string","minLength":5,"maxLength":2})j", "maxLength is below minLength"},
    {R"j({"type":"string","maxLength":5000})j", "above 1000"},
    {R"j({"type":"teapot"})j", "not a JSON Schema type"},
    {R"j({"type":"object","required":["a"]})j", "required names 'a'"},
    {R"j({"type":"integer","minimum":10,"maximum":1})j", "no integer is within its bounds"},
    {R"j({"anyOf":[]})j", "non-empty array"},
    {R"j(false)j", "matches nothing"},
    {R"j({"type":"object","properties":{"x":{"not":{"type":"string"}}}})j", "#/properties/x: not is not supported"},
    {R"j({"anyOf":[{"type":"string"}],"minLength":2})j", "minLength beside anyOf is not supported"},
    {R"j({"$defs":{"A":{"$ref":"#/$defs/A"}},"$ref":"#/$defs/A"})j", "left-recursive"},
    {R"j(5)j", "a schema is an object or a boolean"},
};

// Random texts the grammar lets through, one byte-sized token at a time:
// structure characters are favoured so objects and strings end.
std::vector<std::string> Sample(const std::string& grammar_text, int count, uint64_t seed) {
  absl::StatusOr<Grammar> parsed = Grammar::Parse(grammar_text);
  EXPECT_TRUE(parsed.ok()) << parsed.status() << "\n" << grammar_text;
  if (!parsed.ok()) return {};
  auto grammar = std::make_shared<const Grammar>(*std::move(parsed));
  std::vector<std::string> vocab;
  for (int c = 0x20; c < 0x7F; ++c) vocab.push_back(std::string(1, static_cast<char>(c)));
  for (const char* more : {"\n", "\t", "\xC3\xA9", "\xE2\x82\xAC", "\\n", "\\u00e9", "true", "null", "false"}) vocab.push_back(more);
  const TokenTrie trie(vocab);
  const std::string favoured = "\"}]0,:1-";
  std::mt19937_64 rng(seed);
  std::vector<std::string> texts;
  for (int n = 0; n < count; ++n) {
    GrammarMatcher matcher(grammar);
    std::string text;
    std::vector<uint8_t> allowed;
    for (int step = 0; step < 3000; ++step) {
      if (matcher.CanEnd() && (rng() % 4 == 0 || step > 2000)) break;
      matcher.FillMask(trie, allowed);
      std::vector<size_t> ok, preferred;
      for (size_t id = 0; id < vocab.size(); ++id) {
        if (!allowed[id]) continue;
        ok.push_back(id);
        if (favoured.find(vocab[id][0]) != std::string::npos) preferred.push_back(id);
      }
      if (ok.empty()) break;
      const std::vector<size_t>& from = !preferred.empty() && rng() % 3 != 0 ? preferred : ok;
      const std::string& token = vocab[from[rng() % from.size()]];
      EXPECT_TRUE(matcher.Accept(token));
      text += token;
    }
    if (matcher.CanEnd()) texts.push_back(text);
  }
  return texts;
}

TEST(JsonSchemaTest, EveryOutputOfEverySchemaValidates) {
  for (const char* text : kAccepted) {
    const json schema = json::parse(text);
    absl::StatusOr<std::string> grammar = JsonSchemaToGrammar(schema);
    ASSERT_TRUE(grammar.ok()) << text << "\n" << grammar.status();
    const testing::SchemaValidator validator(schema);
    const std::vector<std::string> outputs = Sample(*grammar, 20, 7);
    // A random walk seldom spells what a pattern asks for; everything else ends.
    if (std::string(text).find("pattern") == std::string::npos) {
      EXPECT_GE(outputs.size(), 10u) << "most walks end: " << text;
    }
    for (const std::string& output : outputs) {
      const json value = json::parse(output, nullptr, false);
      ASSERT_FALSE(value.is_discarded()) << text << "\ngave " << output;
      EXPECT_EQ(validator.Check(value), "") << text << "\ngave " << output;
    }
  }
}

TEST(JsonSchemaTest, PropertiesComeInTheSchemasOrder) {
  const json schema = json::parse(R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"integer"}},"required":["zeta","alpha"]})");
  absl::StatusOr<std::string> text = JsonSchemaToGrammar(schema);
  ASSERT_TRUE(text.ok()) << text.status();
  auto grammar = std::make_shared<const Grammar>(*Grammar::Parse(*text));
  GrammarMatcher in_order(grammar);
  EXPECT_TRUE(in_order.Accept(R"({"zeta": 1, "alpha": 2})"));
  EXPECT_TRUE(in_order.CanEnd());
  EXPECT_FALSE(GrammarMatcher(grammar).Allows(R"({"alpha")"));
  EXPECT_FALSE(GrammarMatcher(grammar).Allows(R"({"zeta": 1})" "}")) << "alpha is required";
  // Whitespace is bounded: nine spaces are one too many.
  EXPECT_FALSE(GrammarMatcher(grammar).Allows(std::string("{") + std::string(17, ' ')));
}

// A pattern's grammar takes a JSON string exactly when std::regex finds the
// pattern in its text (JSON Schema's patterns are not anchored).
TEST(JsonSchemaTest, PatternsAgreeWithStdRegex) {
  struct Case {
    std::string pattern;
    std::vector<std::string> texts;
  };
  const Case cases[] = {
      {"^[A-Z]{3}-\\d{4}$", {"ABC-1234", "AB-1234", "ABC-12345", "abc-1234", "XYZ-0000", ""}},
      {"^(foo|bar)+baz?$", {"foo", "foobarba", "foobarbaz", "baz", "foofoo", "fooba"}},
      {"colou?r", {"color", "the colour red", "colr", "COLOR", "colouur", "xcolorx"}},
      {"^[^@\\s]+@[^@\\s]+\\.[a-z]{2,4}$", {"a@b.io", "a b@c.de", "a@b", "x@y.comm", "x@y.commm", "@y.io"}},
      {"^\\+?[0-9 ()-]{7,15}$", {"+1 (555) 010-9999", "5550100", "555-01", "+44 20 7946 0958 12", "phone"}},
      {"^\"q\\\\[.]\\w*(?:x|y){1,2}?$", {"\"q\\.abcx", "\"q\\.y", "\"q\\.xyx", "q\\.x", "\"q\\ax"}},
      {"^.{2,3}$", {"ab", "abc", "a", "abcd", "a\nb"}},  // ASCII: std::regex counts bytes, a pattern characters
      {"\\d+(\\.\\d{1,2})?", {"12", "x3.14y", "abc", ".5"}},
  };
  for (const Case& c : cases) {
    json schema = {{"type", "string"}, {"pattern", c.pattern}};
    absl::StatusOr<std::string> text = JsonSchemaToGrammar(schema);
    ASSERT_TRUE(text.ok()) << c.pattern << ": " << text.status();
    auto grammar = std::make_shared<const Grammar>(*Grammar::Parse(*text));
    const std::regex re(c.pattern);
    for (const std::string& candidate : c.texts) {
      GrammarMatcher m(grammar);
      const bool taken = m.Accept(json(candidate).dump()) && m.CanEnd();
      EXPECT_EQ(taken, std::regex_search(candidate, re)) << c.pattern << " on '" << candidate << "'";
    }
  }
}

TEST(JsonSchemaTest, NumberRangesAreExact) {
  const json schema = json::parse(R"({"type":"number","minimum":-2,"maximum":3})");
  absl::StatusOr<std::string> text = JsonSchemaToGrammar(schema);
  ASSERT_TRUE(text.ok()) << text.status();
  auto grammar = std::make_shared<const Grammar>(*Grammar::Parse(*text));
  for (const char* in : {"-2", "-2.0", "-1.999", "0", "0.5", "2.75", "3", "3.00", "-0.25"}) {
    GrammarMatcher m(grammar);
    EXPECT_TRUE(m.Accept(in) && m.CanEnd()) << in;
  }
  for (const char* out : {"-2.01", "-3", "3.01", "4", "10", "1e2", "03"}) {
    GrammarMatcher m(grammar);
    EXPECT_FALSE(m.Accept(out) && m.CanEnd()) << out;
  }
}

TEST(JsonSchemaTest, IntegerRangesAreExact) {
  const json schema = json::parse(R"({"type":"integer","minimum":-12,"maximum":305})");
  absl::StatusOr<std::string> text = JsonSchemaToGrammar(schema);
  ASSERT_TRUE(text.ok()) << text.status();
  auto grammar = std::make_shared<const Grammar>(*Grammar::Parse(*text));
  for (int i = -40; i <= 400; ++i) {
    GrammarMatcher m(grammar);
    const bool taken = m.Accept(std::to_string(i)) && m.CanEnd();
    EXPECT_EQ(taken, i >= -12 && i <= 305) << i;
  }
  for (const char* bad : {"-0", "007", "1.0", "+5"}) {
    GrammarMatcher m(grammar);
    EXPECT_FALSE(m.Accept(bad) && m.CanEnd()) << bad;
  }
}

TEST(JsonSchemaTest, WhatCannotBeHonouredIsRefusedNamingTheKeywordAndItsPath) {
  for (const Refused& r : kRefused) {
    absl::StatusOr<std::string> grammar = JsonSchemaToGrammar(json::parse(r.schema));
    ASSERT_FALSE(grammar.ok()) << r.schema << " gave\n" << *grammar;
    EXPECT_EQ(grammar.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(grammar.status().message(), r.words)) << r.schema << ": " << grammar.status();
  }
}

TEST(JsonSchemaTest, DeepSchemasAreRefusedNotRecursedInto) {
  std::string deep = "{}";
  for (int i = 0; i < 100; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  absl::StatusOr<std::string> grammar = JsonSchemaToGrammar(json::parse(deep));
  ASSERT_FALSE(grammar.ok());
  EXPECT_TRUE(absl::StrContains(grammar.status().message(), "nest deeper than 64")) << grammar.status();
}

}  // namespace
}  // namespace octo
