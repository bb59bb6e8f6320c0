// Tool calls and thinking models through the real octod over HTTP, on
// random-weight models (whose words mean nothing, so only a grammar makes
// their calls well formed): `required` and named calls always come back as
// valid calls whose arguments satisfy the function's schema, streamed and
// whole replies agree, the openai npm client makes a tool round trip,
// Ollama returns message.tool_calls, a thinking model's thought is reported
// apart from its answer, and bad tool requests are 400s naming the field.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "tests/daemon/grammar/schema_validator.h"
#include "tests/daemon/http/http_e2e_fixture.h"
#include "tests/shared_data.h"

namespace octo::testing {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

const ojson kWeatherParameters = ojson::parse(R"j({
  "type": "object",
  "properties": {"city": {"type": "string", "maxLength": 16}, "unit": {"enum": ["C", "F"]},
                 "days": {"type": "integer", "minimum": 1, "maximum": 7}},
  "required": ["city", "unit"],
  "additionalProperties": false})j");
const ojson kSearchParameters = ojson::parse(R"j({
  "type": "object",
  "properties": {"query": {"type": "string", "maxLength": 24},
                 "filters": {"type": "array", "items": {"$ref": "#/$defs/filter"}, "maxItems": 2}},
  "required": ["query"],
  "$defs": {"filter": {"type": "object", "properties": {"field": {"enum": ["date", "site"]},
                                                        "value": {"type": "string", "maxLength": 10}},
                       "required": ["field", "value"], "additionalProperties": false}}})j");

json Tools() {
  return json::array({{{"type", "function"},
                       {"function", {{"name", "get_weather"}, {"description", "Weather now"},
                                     {"parameters", json::parse(kWeatherParameters.dump())}}}},
                      {{"type", "function"},
                       {"function", {{"name", "search"}, {"parameters", json::parse(kSearchParameters.dump())}}}}});
}

// "" when `name(arguments)` is a call to one of Tools() whose arguments
// (JSON text) satisfy its parameters; else why not.
std::string CheckCall(const std::string& name, const std::string& arguments) {
  const ojson parsed = ojson::parse(arguments, nullptr, false);
  if (parsed.is_discarded()) return "arguments are not JSON: " + arguments;
  if (name == "get_weather") return SchemaValidator(kWeatherParameters).Check(parsed);
  if (name == "search") return SchemaValidator(kSearchParameters).Check(parsed);
  return "no tool is named " + name;
}

class HttpToolsE2eTest : public HttpE2eTest {
 protected:
  struct Reply {
    std::string content, reasoning, finish;
    std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
    bool operator==(const Reply&) const = default;
  };

  // A chat completion, whole or streamed (its deltas gathered as the
  // openai SDK gathers them).
  Reply Chat(const json& request, bool stream) const {
    json body = request;
    body["stream"] = stream;
    const auto [text, status] = CurlPost("/v1/chat/completions", body.dump());
    EXPECT_EQ(status, 200) << text;
    Reply reply;
    if (!stream) {
      const json parsed = json::parse(text, nullptr, false);
      if (parsed.is_discarded() || !parsed.contains("choices")) return reply;
      const json& message = parsed["choices"][0]["message"];
      reply.content = message["content"].is_string() ? message["content"].get<std::string>() : "";
      reply.reasoning = message.value("reasoning_content", "");
      reply.finish = parsed["choices"][0]["finish_reason"];
      for (const json& call : message.value("tool_calls", json::array())) {
        EXPECT_TRUE(absl::StartsWith(call["id"].get<std::string>(), "call_")) << text;
        EXPECT_EQ(call["type"], "function") << text;
        reply.calls.emplace_back(call["function"]["name"], call["function"]["arguments"]);
      }
      return reply;
    }
    for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      if (!absl::ConsumePrefix(&line, "data: ") || line == "[DONE]") continue;
      const json chunk = json::parse(line, nullptr, false);
      if (chunk.is_discarded() || chunk["choices"].empty()) continue;
      const json& delta = chunk["choices"][0]["delta"];
      if (delta.contains("content") && delta["content"].is_string()) reply.content += delta["content"].get<std::string>();
      reply.reasoning += delta.value("reasoning_content", "");
      for (const json& call : delta.value("tool_calls", json::array())) {
        const size_t index = call["index"];
        if (reply.calls.size() <= index) reply.calls.resize(index + 1);
        reply.calls[index].first += call["function"].value("name", "");
        reply.calls[index].second += call["function"].value("arguments", "");
      }
      if (chunk["choices"][0]["finish_reason"].is_string()) reply.finish = chunk["choices"][0]["finish_reason"];
    }
    return reply;
  }
};

// `required` on the llama2-family model (the generic JSON format) and a
// named function on a chatml model (Qwen's <tool_call> format): every seed
// gives a well-formed call with valid arguments, streamed as it is whole.
TEST_F(HttpToolsE2eTest, RequiredAndNamedCallsAreAlwaysValidCalls) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  MakeModel("qwen", 2, "Q8_0", "tiny-qwen3");
  StartWithHttp({"--max-loaded-models", "2"});
  struct Case {
    std::string model;
    json tool_choice;
    int seeds;
  };
  const Case cases[] = {
      {"tiny", "required", 20},
      {"qwen", {{"type", "function"}, {"function", {{"name", "search"}}}}, 20},
  };
  for (const Case& c : cases) {
    int parallel = 0;
    for (int seed = 1; seed <= c.seeds; ++seed) {
      SCOPED_TRACE(c.model + " seed " + std::to_string(seed));
      const json request = {{"model", c.model},
                            {"messages", {{{"role", "user"}, {"content", "What is the weather in Oslo?"}}}},
                            {"tools", Tools()},
                            {"tool_choice", c.tool_choice},
                            {"max_tokens", 1500},
                            {"temperature", 1.0},
                            {"seed", seed}};
      const Reply whole = Chat(request, /*stream=*/false);
      EXPECT_EQ(whole.finish, "tool_calls");
      ASSERT_FALSE(whole.calls.empty());
      for (const auto& [name, arguments] : whole.calls) {
        EXPECT_EQ(CheckCall(name, arguments), "") << name << "(" << arguments << ")";
        if (c.tool_choice.is_object()) {
          EXPECT_EQ(name, "search");
        }
      }
      parallel += whole.calls.size() > 1;
      if (seed <= 4) {
        EXPECT_EQ(Chat(request, /*stream=*/true), whole) << "streamed and whole agree";
      }
    }
    std::printf("%s: %d of %d replies made more than one call\n", c.model.c_str(), parallel, c.seeds);
  }
  // auto: the model writes what it likes; a call it makes is valid (Qwen's
  // format is held from its <tool_call> tag on).
  for (int seed = 1; seed <= 4; ++seed) {
    const json request = {{"model", "qwen"},
                          {"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
                          {"tools", Tools()},
                          {"max_tokens", 60},
                          {"temperature", 1.0},
                          {"seed", seed}};
    const Reply reply = Chat(request, /*stream=*/false);
    EXPECT_TRUE(reply.finish == "stop" || reply.finish == "length" || reply.finish == "tool_calls") << reply.finish;
    for (const auto& [name, arguments] : reply.calls) EXPECT_EQ(CheckCall(name, arguments), "") << arguments;
    EXPECT_EQ(Chat(request, /*stream=*/true), reply);
  }
}

// A trained model (../shared's stories260K, a llama2-family SentencePiece
// model that has never seen a tool) asked for a required call: every seed's
// reply is a valid call.
TEST_F(HttpToolsE2eTest, ATrainedModelsRequiredCallsAreValidForEverySeed) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  OCTO_REQUIRE_SHARED("models/stories260K.gguf");
  ASSERT_TRUE(CachedDecompose(SharedPath("models/stories260K.gguf"), ModelDir("stories")));
  StartWithHttp({}, "stories");
  for (int seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const json request = {{"model", "stories"},
                          {"messages", {{{"role", "user"}, {"content", "Once upon a time, the weather"}}}},
                          {"tools", Tools()},
                          {"tool_choice", "required"},
                          {"parallel_tool_calls", false},
                          {"max_tokens", 400},
                          {"temperature", 0.8},
                          {"seed", seed}};
    const Reply reply = Chat(request, /*stream=*/false);
    EXPECT_EQ(reply.finish, "tool_calls");
    ASSERT_EQ(reply.calls.size(), 1u) << "parallel_tool_calls false";
    EXPECT_EQ(CheckCall(reply.calls[0].first, reply.calls[0].second), "") << reply.calls[0].second;
  }
}

// Eight clients at once, each with its own schema or tool: each reply
// holds to its own constraint (one matcher per request, batched together).
TEST_F(HttpToolsE2eTest, EightConcurrentConstrainedRequestsEachHoldToTheirOwn) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  StartWithHttp();
  const std::vector<ojson> schemas = {
      ojson::parse(R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["n"]})"),
      ojson::parse(R"({"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3})"),
      ojson::parse(R"({"type": "object", "properties": {"tag": {"enum": ["a", "b"]}}, "required": ["tag"], "additionalProperties": false})"),
      ojson::parse(R"({"type": "string", "maxLength": 5})"),
      ojson::parse(R"({"type": "object", "properties": {"when": {"type": "string", "format": "date"}}, "required": ["when"]})"),
      ojson::parse(R"({"anyOf": [{"type": "null"}, {"type": "integer", "minimum": -3, "maximum": 3}]})"),
  };
  std::vector<Reply> replies(8);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < replies.size(); ++i) {
    clients.emplace_back([&, i] {
      json request = {{"model", "tiny"},
                      {"messages", {{{"role", "user"}, {"content", "Answer."}}}},
                      {"max_tokens", 600},
                      {"temperature", 1.0},
                      {"seed", static_cast<int>(i) + 1}};
      if (i < schemas.size()) {
        request["response_format"] = {{"type", "json_schema"},
                                      {"json_schema", {{"name", "s"}, {"schema", json::parse(schemas[i].dump())}}}};
      } else {
        request["tools"] = Tools();
        request["tool_choice"] = {{"type", "function"}, {"function", {{"name", i % 2 ? "search" : "get_weather"}}}};
      }
      replies[i] = Chat(request, /*stream=*/i % 2 == 1);
    });
  }
  for (std::thread& client : clients) client.join();
  for (size_t i = 0; i < replies.size(); ++i) {
    SCOPED_TRACE("client " + std::to_string(i));
    if (i < schemas.size()) {
      ASSERT_EQ(replies[i].finish, "stop") << replies[i].content;
      const ojson value = ojson::parse(replies[i].content, nullptr, false);
      ASSERT_FALSE(value.is_discarded()) << replies[i].content;
      EXPECT_EQ(SchemaValidator(schemas[i]).Check(value), "") << replies[i].content;
    } else {
      EXPECT_EQ(replies[i].finish, "tool_calls");
      ASSERT_FALSE(replies[i].calls.empty());
      for (const auto& [name, arguments] : replies[i].calls) {
        EXPECT_EQ(name, i % 2 ? "search" : "get_weather");
        EXPECT_EQ(CheckCall(name, arguments), "") << arguments;
      }
    }
  }
}

// The openai npm client's tool round trip: a required call, its result
// sent back in a tool message, an answer; and the call streamed as
// tool_call deltas with finish_reason "tool_calls".
TEST_F(HttpToolsE2eTest, TheOpenAiNpmClientMakesAToolRoundTrip) {
  if (const std::string missing = NpmClientMissing("openai"); !missing.empty()) GTEST_SKIP() << missing;
  StartWithHttp();
  const RunResult r = RunCommand({NodePath(), std::string(kOpenAiClientDir) + "/openai_check.mjs", base_ + "/v1",
                                  "unused", "tools", "tiny", "Weather in Paris?", "300"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json reply = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(reply.is_discarded()) << r.out;
  ASSERT_FALSE(reply.contains("error")) << r.out;
  EXPECT_EQ(reply["finish_reason"], "tool_calls") << r.out;
  EXPECT_EQ(reply["call"]["name"], "get_weather") << r.out;
  const ojson weather = ojson::parse(R"j({"type": "object", "properties": {"city": {"type": "string", "maxLength": 16},
      "unit": {"enum": ["C", "F"]}}, "required": ["city", "unit"], "additionalProperties": false})j");
  const ojson arguments = ojson::parse(reply["call"]["arguments"].get<std::string>(), nullptr, false);
  EXPECT_EQ(SchemaValidator(weather).Check(arguments), "") << r.out;
  EXPECT_TRUE(reply["answer"].is_string()) << r.out;
  EXPECT_TRUE(reply["answer_finish"] == "stop" || reply["answer_finish"] == "length") << r.out;
  ASSERT_TRUE(reply["streamed_call"].is_object()) << r.out;
  EXPECT_TRUE(absl::StartsWith(reply["streamed_call"]["id"].get<std::string>(), "call_")) << r.out;
  EXPECT_EQ(reply["streamed_call"]["name"], "get_weather") << r.out;
  const ojson streamed = ojson::parse(reply["streamed_call"]["arguments"].get<std::string>(), nullptr, false);
  EXPECT_EQ(SchemaValidator(weather).Check(streamed), "") << r.out;
  EXPECT_EQ(reply["streamed_finish"], "tool_calls") << r.out;
}

// Ollama's tools: the llama2-family model calls in the generic JSON form,
// held here by a `format` schema of that form; the reply's
// message.tool_calls carries the call with its arguments as an object, and
// a history with the call and a tool message is taken.
TEST_F(HttpToolsE2eTest, OllamaRepliesCarryMessageToolCalls) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  StartWithHttp();
  json call_schema = {{"type", "object"},
                      {"properties", {{"name", {{"const", "get_weather"}}},
                                      {"arguments", json::parse(kWeatherParameters.dump())}}},
                      {"required", {"name", "arguments"}},
                      {"additionalProperties", false}};
  const json format = {{"type", "object"},
                       {"properties", {{"tool_calls", {{"type", "array"}, {"items", call_schema},
                                                       {"minItems", 1}, {"maxItems", 1}}}}},
                       {"required", {"tool_calls"}},
                       {"additionalProperties", false}};
  json request = {{"model", "tiny"},
                  {"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}}}},
                  {"tools", Tools()},
                  {"format", format},
                  {"stream", false},
                  {"options", {{"seed", 3}, {"num_predict", 400}}}};
  auto [body, status] = CurlPost("/api/chat", request.dump());
  ASSERT_EQ(status, 200) << body;
  const json reply = json::parse(body);
  ASSERT_EQ(reply["done_reason"], "stop") << body;
  const json& calls = reply["message"]["tool_calls"];
  ASSERT_EQ(calls.size(), 1u) << body;
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather") << body;
  ASSERT_TRUE(calls[0]["function"]["arguments"].is_object()) << body;
  EXPECT_EQ(CheckCall("get_weather", calls[0]["function"]["arguments"].dump()), "") << body;
  EXPECT_EQ(reply["message"]["content"], "") << body;
  // Streamed: the call in a line of its own, then the done line.
  request["stream"] = true;
  std::tie(body, status) = CurlPost("/api/chat", request.dump());
  ASSERT_EQ(status, 200) << body;
  json streamed_calls;
  for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
    const json chunk = json::parse(line, nullptr, false);
    if (chunk.contains("message") && chunk["message"].contains("tool_calls")) streamed_calls = chunk["message"]["tool_calls"];
  }
  EXPECT_EQ(streamed_calls, calls) << body;
  // The round trip's next request: the call and its result in the history.
  json history = request;
  history["stream"] = false;
  history.erase("format");
  history["options"]["num_predict"] = 8;
  history["messages"].push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}});
  history["messages"].push_back({{"role", "tool"}, {"content", "18 C"}, {"tool_name", "get_weather"}});
  std::tie(body, status) = CurlPost("/api/chat", history.dump());
  EXPECT_EQ(status, 200) << body;
}

// A model whose template thinks (<think> in it): /api/show says so, and a
// reply that opens with a thought reports it apart (reasoning_content,
// message.thinking), while a constraint holds the answer after it.
TEST_F(HttpToolsE2eTest, AThinkingModelsThoughtIsReportedApart) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  MakeModel("qwen", 2, "Q8_0", "tiny-qwen3");
  const std::string gguf = dir_.Path("thinker.gguf");
  std::filesystem::copy_file(dir_.Path("qwen.gguf"), gguf);
  ReplaceGgufString(gguf, "tokenizer.chat_template",
                    "{%- if tools %}tools{%- endif %}<|im_start|>{{ message['content'] }}<think>\n</think>");
  ASSERT_TRUE(Decompose(gguf, ModelDir("thinker")));
  StartWithHttp({}, "thinker");
  auto [body, status] = CurlPost("/api/show", R"({"model": "thinker"})");
  ASSERT_EQ(status, 200) << body;
  const json capabilities = json::parse(body)["capabilities"];
  EXPECT_NE(std::find(capabilities.begin(), capabilities.end(), "thinking"), capabilities.end()) << body;
  EXPECT_NE(std::find(capabilities.begin(), capabilities.end(), "tools"), capabilities.end()) << body;

  // A grammar that writes the thought itself, then the answer "{}".
  const json request = {{"model", "thinker"},
                        {"messages", {{{"role", "user"}, {"content", "Think, then answer."}}}},
                        {"grammar", R"(root ::= "<think>" [a-z]{3,12} "</think>\n" "{}")"},
                        {"max_tokens", 60},
                        {"temperature", 1.0},
                        {"seed", 9}};
  const Reply whole = Chat(request, /*stream=*/false);
  EXPECT_EQ(whole.finish, "stop");
  EXPECT_EQ(whole.content, "{}");
  EXPECT_GE(whole.reasoning.size(), 3u);
  EXPECT_EQ(whole.reasoning.find_first_not_of("abcdefghijklmnopqrstuvwxyz"), std::string::npos) << whole.reasoning;
  EXPECT_EQ(Chat(request, /*stream=*/true), whole);
  // JSON mode on a thinking model: the answer after any thought is JSON.
  for (int seed = 1; seed <= 6; ++seed) {
    const json json_mode = {{"model", "thinker"},
                            {"messages", {{{"role", "user"}, {"content", "JSON please."}}}},
                            {"response_format", {{"type", "json_object"}}},
                            {"max_tokens", 200},
                            {"seed", seed}};
    const Reply reply = Chat(json_mode, /*stream=*/false);
    if (reply.finish == "stop") {
      EXPECT_TRUE(json::parse(reply.content, nullptr, false).is_object()) << reply.content;
    }
  }
  // Ollama: the thought in message.thinking.
  const json ollama = {{"model", "thinker"},
                       {"messages", request["messages"]},
                       {"stream", false},
                       {"options", {{"seed", 9}, {"num_predict", 60}}}};
  json with_grammar = ollama;
  with_grammar["format"] = {{"type", "object"}, {"additionalProperties", false}};
  std::tie(body, status) = CurlPost("/api/chat", with_grammar.dump());
  ASSERT_EQ(status, 200) << body;
  const json message = json::parse(body)["message"];
  if (json::parse(body)["done_reason"] == "stop") {
    EXPECT_TRUE(json::parse(message["content"].get<std::string>(), nullptr, false).is_object()) << body;
  }
}

TEST_F(HttpToolsE2eTest, BadToolRequestsAre400sNamingTheField) {
  if (CurlPath().empty()) GTEST_SKIP() << "curl is not installed";
  StartWithHttp();
  const json messages = {{{"role", "user"}, {"content", "x"}}};
  const json bad_schema = {{{"type", "function"},
                            {"function", {{"name", "f"}, {"parameters", {{"type", "object"},
                                                                         {"properties", {{"n", {{"type", "integer"}, {"multipleOf", 3}}}}}}}}}}};
  struct Case {
    std::string path;
    json body;
    std::string field;
  };
  const Case cases[] = {
      {"/v1/chat/completions", {{"messages", messages}, {"tools", {{{"type", "function"}, {"function", {{"description", "d"}}}}}}},
       "tools[0].function.name"},
      {"/v1/chat/completions",
       {{"messages", messages}, {"tools", Tools()}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "absent"}}}}}},
       "tool_choice"},
      {"/v1/chat/completions", {{"messages", messages}, {"tools", bad_schema}, {"tool_choice", "required"}}, "multipleOf"},
      {"/v1/chat/completions",
       {{"messages", messages}, {"tools", Tools()}, {"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}},
       "tool_choice"},
      {"/v1/chat/completions",
       {{"messages", {{{"role", "assistant"}, {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", 1}}}}}}}}}},
       "messages[0].tool_calls[0].function.arguments"},
      {"/v1/completions", {{"prompt", "x"}, {"tools", Tools()}}, "tools"},
      {"/api/generate", {{"prompt", "x"}, {"tools", Tools()}}, "tools"},
      {"/api/chat", {{"messages", messages}, {"tools", {{{"function", {{"name", "bad name!"}}}}}}}, "tools[0].function.name"},
  };
  for (const Case& c : cases) {
    json body = c.body;
    body["model"] = "tiny";
    const auto [reply, status] = CurlPost(c.path, body.dump());
    EXPECT_EQ(status, 400) << body.dump() << " -> " << reply;
    EXPECT_TRUE(absl::StrContains(reply, c.field)) << reply;
  }
  const auto [body, status] = CurlPost("/v1/completions", R"({"model": "tiny", "prompt": "x", "max_tokens": 2})");
  EXPECT_EQ(status, 200) << "still serving: " << body;
}

}  // namespace
}  // namespace octo::testing
