// Constrained output through the real octod over HTTP, on a random-weight
// model: OpenAI's response_format json_object and Ollama's format "json"
// give JSON that parses, streamed and whole replies agree, llama-server's
// grammar field holds a completion to its pattern, and constraints octod
// does not take are refused naming the field while octod stays up.
#include <regex>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "tests/daemon/http/http_e2e_fixture.h"

namespace octo::testing {
namespace {

using json = nlohmann::json;

class HttpGrammarE2eTest : public HttpE2eTest {
 protected:
  // A chat completion's whole reply (stream false) or its streamed deltas
  // joined; and its finish_reason.
  std::pair<std::string, std::string> Chat(const json& extra, bool stream) const {
    json request = {{"model", "tiny"},
                    {"messages", {{{"role", "user"}, {"content", "Give me a JSON object."}}}},
                    {"max_tokens", 300},
                    {"temperature", 1.0},
                    {"stream", stream}};
    request.update(extra);
    const auto [body, status] = CurlPost("/v1/chat/completions", request.dump());
    EXPECT_EQ(status, 200) << body;
    if (!stream) {
      const json reply = json::parse(body, nullptr, false);
      if (reply.is_discarded() || !reply.contains("choices")) return {"", ""};
      return {reply["choices"][0]["message"].value("content", ""), reply["choices"][0].value("finish_reason", "")};
    }
    std::string text, finish;
    for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
      if (!absl::ConsumePrefix(&line, "data: ") || line == "[DONE]") continue;
      const json chunk = json::parse(line, nullptr, false);
      if (chunk.is_discarded() || chunk["choices"].empty()) continue;
      text += chunk["choices"][0]["delta"].value("content", "");
      if (chunk["choices"][0]["finish_reason"].is_string()) finish = chunk["choices"][0]["finish_reason"];
    }
    return {text, finish};
  }
};

TEST_F(HttpGrammarE2eTest, JsonModeRepliesParseAndStreamAsTheyAreWhole) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  StartWithHttp();
  int whole = 0;
  for (int seed = 1; seed <= 20; ++seed) {
    const json constraint = {{"response_format", {{"type", "json_object"}}}, {"seed", seed}};
    const auto [text, finish] = Chat(constraint, /*stream=*/false);
    if (finish == "stop") {
      ++whole;
      EXPECT_TRUE(json::parse(text, nullptr, false).is_object()) << "seed " << seed << ": " << text;
    } else {
      EXPECT_EQ(finish, "length") << text;
    }
    EXPECT_EQ(Chat(constraint, /*stream=*/true), std::make_pair(text, finish)) << "seed " << seed;
  }
  EXPECT_GT(whole, 0);
  // Ollama's format "json".
  const json generate = {{"model", "tiny"}, {"prompt", "JSON:"}, {"format", "json"}, {"stream", false},
                         {"options", {{"seed", 3}, {"num_predict", 300}}}};
  const auto [body, status] = CurlPost("/api/generate", generate.dump());
  ASSERT_EQ(status, 200) << body;
  const json reply = json::parse(body);
  if (reply["done_reason"] == "stop") {
    EXPECT_TRUE(json::parse(reply["response"].get<std::string>(), nullptr, false).is_object()) << body;
  }
}

// The openai npm client's response_format json_schema (strict), as the AI
// SDK's generateObject sends it: the reply parses and satisfies the schema.
TEST_F(HttpGrammarE2eTest, TheOpenAiNpmClientsJsonSchemaReplyValidates) {
  if (const std::string missing = NpmClientMissing("openai"); !missing.empty()) GTEST_SKIP() << missing;
  StartWithHttp();
  const RunResult r = RunCommand({NodePath(), std::string(kOpenAiClientDir) + "/openai_check.mjs", base_ + "/v1",
                                  "unused", "json-schema", "tiny", "Describe a person.", "200"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json reply = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(reply.contains("error")) << r.out;
  ASSERT_EQ(reply["finish_reason"], "stop") << r.out;
  const json& person = reply["parsed"];
  ASSERT_TRUE(person.is_object()) << r.out;
  ASSERT_TRUE(person["name"].is_string()) << r.out;
  EXPECT_LE(person["name"].get<std::string>().size(), 12u * 4) << "at most 12 characters";
  ASSERT_TRUE(person["age"].is_number_integer()) << r.out;
  EXPECT_GE(person["age"].get<int>(), 0);
  EXPECT_LE(person["age"].get<int>(), 120);
  ASSERT_TRUE(person["pets"].is_array()) << r.out;
  EXPECT_LE(person["pets"].size(), 3u);
  for (const json& pet : person["pets"]) EXPECT_TRUE(pet == "cat" || pet == "dog") << r.out;
  // The members in the schema's order, not sorted.
  EXPECT_LT(reply["text"].get<std::string>().find("\"name\""), reply["text"].get<std::string>().find("\"age\""));
  EXPECT_LT(reply["text"].get<std::string>().find("\"age\""), reply["text"].get<std::string>().find("\"pets\""));
}

// The ollama npm client's chat with a schema as `format` (LangChain's
// withStructuredOutput on Ollama): the reply parses and validates.
TEST_F(HttpGrammarE2eTest, TheOllamaNpmClientsSchemaFormatReplyValidates) {
  if (const std::string missing = NpmClientMissing("ollama"); !missing.empty()) GTEST_SKIP() << missing;
  StartWithHttp();
  const RunResult r = RunCommand({NodePath(), std::string(kOpenAiClientDir) + "/ollama_check.mjs", base_, "structured",
                                  "tiny", "Name a city.", "200"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json reply = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(reply.contains("error")) << r.out;
  ASSERT_EQ(reply["done_reason"], "stop") << r.out;
  const json& city = reply["parsed"];
  ASSERT_TRUE(city.is_object()) << r.out;
  ASSERT_TRUE(city["city"].is_string()) << r.out;
  ASSERT_TRUE(city["population"].is_number_integer()) << r.out;
  EXPECT_LE(city["population"].get<int64_t>(), 40000000);
  EXPECT_GE(city["population"].get<int64_t>(), 0);
}

TEST_F(HttpGrammarE2eTest, AGrammarHoldsACompletionToItsPattern) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  StartWithHttp();
  const std::regex pattern("(red|green|blue), [0-9]{1,3}");
  for (int seed = 1; seed <= 4; ++seed) {
    const json request = {{"model", "tiny"}, {"prompt", "Colour:"}, {"max_tokens", 20}, {"temperature", 1.0},
                          {"seed", seed}, {"grammar", R"(root ::= ("red" | "green" | "blue") ", " [0-9]{1,3})"}};
    const auto [body, status] = CurlPost("/v1/completions", request.dump());
    ASSERT_EQ(status, 200) << body;
    const json reply = json::parse(body);
    const std::string text = reply["choices"][0]["text"];
    EXPECT_EQ(reply["choices"][0]["finish_reason"], "stop") << body;
    EXPECT_TRUE(std::regex_match(text, pattern)) << "seed " << seed << ": '" << text << "'";
  }
}

TEST_F(HttpGrammarE2eTest, ConstraintsOctodDoesNotTakeAreRefusedNamingTheField) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  StartWithHttp();
  struct Case {
    std::string path;
    json body;
    std::string field;
  };
  const json messages = {{{"role", "user"}, {"content", "x"}}};
  const Case cases[] = {
      {"/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"grammar", "root ::= (\"a\""}}, "grammar"},
      {"/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"grammar", "root ::= root \"a\""}}, "grammar"},
      {"/v1/chat/completions", {{"model", "tiny"}, {"messages", messages}, {"guided_json", {{"type", "object"}}}},
       "guided_json"},
      {"/v1/chat/completions", {{"model", "tiny"}, {"messages", messages}, {"response_format", {{"type", "xml"}}}},
       "response_format"},
      {"/api/generate", {{"model", "tiny"}, {"prompt", "x"}, {"format", "yaml"}}, "format"},
      {"/api/generate", {{"model", "tiny"}, {"prompt", "x"}, {"format", {{"type", "string"}, {"pattern", "(a)\\1"}}}},
       "back-references are not supported"},
      {"/v1/chat/completions",
       {{"model", "tiny"}, {"messages", messages},
        {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", "integer"}, {"multipleOf", 2}}}}}}}},
       "multipleOf"},
  };
  for (const Case& c : cases) {
    const auto [body, status] = CurlPost(c.path, c.body.dump());
    EXPECT_EQ(status, 400) << c.body.dump() << " -> " << body;
    EXPECT_TRUE(absl::StrContains(body, c.field)) << body;
  }
  const auto [body, status] = CurlPost("/v1/completions", R"({"model": "tiny", "prompt": "x", "max_tokens": 2})");
  EXPECT_EQ(status, 200) << "still serving: " << body;
}

}  // namespace
}  // namespace octo::testing
