// Request bodies of the OpenAI and Ollama APIs -> core jobs: defaults,
// every field, and a named 400 for each kind of bad value.
#include "daemon/http/http_status.h"
#include "daemon/http/ollama_api.h"
#include "daemon/grammar/json_grammar.h"
#include "daemon/http/openai_api.h"
#include "gtest/gtest.h"

namespace octo {
namespace {

using nlohmann::json;

const json kChat = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};

TEST(OpenAiParse, ChatDefaultsAreOpenAis) {
  const absl::StatusOr<OpenAiRequest> request = ParseChatCompletionRequest(kChat);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->model, "m");
  EXPECT_TRUE(request->job.chat);
  ASSERT_EQ(request->messages.size(), 1u);
  EXPECT_EQ(request->messages[0].content, "Hi");
  const SamplingParams& s = request->job.sampling;
  EXPECT_EQ(s.temperature, 1.0);
  EXPECT_EQ(s.top_p, 1.0);
  EXPECT_EQ(s.top_k, 0);
  EXPECT_EQ(s.min_p, 0.0);
  EXPECT_EQ(s.max_tokens, -1);
  EXPECT_FALSE(s.seed.has_value());
  EXPECT_FALSE(request->stream);
  EXPECT_FALSE(request->logprobs);
}

TEST(OpenAiParse, ChatReadsEveryField) {
  json body = kChat;
  body.update({{"temperature", 0}, {"top_p", 0.5}, {"stop", "\n"}, {"seed", 7}, {"max_completion_tokens", 9},
               {"stream", true}, {"stream_options", {{"include_usage", true}}}, {"logprobs", true},
               {"top_logprobs", 3}, {"frequency_penalty", 0.5}, {"presence_penalty", -0.5}, {"top_k", 5},
               {"min_p", 0.1}, {"repeat_penalty", 1.2}, {"chat_template", "chatml"}, {"user", "ignored"}});
  body["messages"] = {{{"role", "developer"}, {"content", "Be brief."}},
                      {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}};
  const absl::StatusOr<OpenAiRequest> request = ParseChatCompletionRequest(body);
  ASSERT_TRUE(request.ok()) << request.status();
  const SamplingParams& s = request->job.sampling;
  EXPECT_EQ(s.temperature, 0);
  EXPECT_EQ(s.top_p, 0.5);
  EXPECT_EQ(s.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(s.seed, 7u);
  EXPECT_EQ(s.max_tokens, 9);
  EXPECT_EQ(s.top_logprobs, 3);
  EXPECT_EQ(s.frequency_penalty, 0.5);
  EXPECT_EQ(s.presence_penalty, -0.5);
  EXPECT_EQ(s.top_k, 5);
  EXPECT_EQ(s.min_p, 0.1);
  EXPECT_EQ(s.repeat_penalty, 1.2);
  EXPECT_TRUE(request->stream);
  EXPECT_TRUE(request->include_usage);
  EXPECT_TRUE(request->logprobs);
  EXPECT_EQ(request->job.chat_template, "chatml");
  EXPECT_EQ(request->messages[0].role, "system") << "developer is OpenAI's newer name for system";
  EXPECT_EQ(request->messages[1].content, "ab");
}

// Tools, tool_choice, an assistant's calls and a tool's result, as the
// openai SDKs send a tool round trip; the parameters keep their written order.
TEST(OpenAiParse, ToolsAndTheirMessages) {
  const std::string text = R"j({"model": "m", "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
      "parameters": {"type": "object", "properties": {"unit": {"type": "string"}, "city": {"type": "string"}},
                     "required": ["city"]}}}],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": false})j";
  const json body = json::parse(text);
  const absl::StatusOr<OpenAiRequest> request = ParseChatCompletionRequest(body, text);
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_EQ(request->tools.tools.size(), 1u);
  const ToolFunction& tool = request->tools.tools[0];
  EXPECT_EQ(tool.name, "get_weather");
  EXPECT_EQ(tool.description, "Weather now");
  EXPECT_EQ(tool.parameters["properties"].begin().key(), "unit") << "written order, not key order";
  EXPECT_EQ(request->tools.choice.mode, ToolChoice::Mode::kNamed);
  EXPECT_EQ(request->tools.choice.name, "get_weather");
  EXPECT_FALSE(request->tools.choice.parallel);
  ASSERT_EQ(request->messages.size(), 3u);
  ASSERT_EQ(request->messages[1].calls.size(), 1u);
  EXPECT_EQ(request->messages[1].calls[0].id, "call_1");
  EXPECT_EQ(request->messages[1].calls[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(request->messages[2].role, "tool");
  EXPECT_EQ(request->messages[2].tool_call_id, "call_1");
  // Ollama's spelling: arguments an object, the result named by tool_name.
  const json ollama = {{"model", "m"},
                       {"messages", {{{"role", "assistant"}, {"content", ""},
                                      {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", {{"x", 1}}}}}}}}},
                                     {{"role", "tool"}, {"content", "2"}, {"tool_name", "f"}}}},
                       {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}};
  const absl::StatusOr<OllamaRequest> chat = ParseOllamaChat(ollama);
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->messages[0].calls[0].arguments, "{\"x\":1}");
  EXPECT_EQ(chat->messages[1].tool_name, "f");
  EXPECT_TRUE(chat->tools.offered());
  EXPECT_EQ(ParseOllamaGenerate({{"model", "m"}, {"tools", ollama["tools"]}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Each bad body -> 400 with a message starting with the field it names.
TEST(OpenAiParse, BadChatFieldsAreNamed) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"model", nullptr}}, "model"},
      {{{"model", 3}}, "model"},
      {{{"messages", nullptr}}, "messages"},
      {{{"messages", json::array()}}, "messages"},
      {{{"messages", {{{"role", "robot"}, {"content", "x"}}}}}, "messages[0].role"},
      {{{"messages", {{{"role", "assistant"}, {"tool_calls", {{{"function", {{"arguments", "{}"}}}}}}}}}},
       "messages[0].tool_calls[0].function.name"},
      {{{"messages", {{{"role", "assistant"}, {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", 5}}}}}}}}}},
       "messages[0].tool_calls[0].function.arguments"},
      {{{"messages", {{{"content", "x"}}}}}, "messages[0].role"},
      {{{"messages", {{{"role", "user"}, {"content", 5}}}}}, "messages[0].content"},
      {{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}, "messages[0].content[0]"},
      {{{"temperature", "hot"}}, "temperature"},
      {{{"max_tokens", -5}}, "max_tokens"},
      {{{"max_tokens", 1.5}}, "max_tokens"},
      {{{"stop", {1, 2}}}, "stop"},
      {{{"seed", -1}}, "seed"},
      {{{"stream", "yes"}}, "stream"},
      {{{"stream_options", 1}}, "stream_options"},
      {{{"top_logprobs", 21}, {"logprobs", true}}, "top_logprobs"},
      {{{"top_logprobs", 2}}, "top_logprobs"},
      {{{"n", 2}}, "n"},
      {{{"logit_bias", {{"50256", -100}}}}, "logit_bias"},
      {{{"tools", {{{"type", "function"}}}}}, "tools[0].function"},
      {{{"tools", {{{"type", "function"}, {"function", {{"description", "no name"}}}}}}}, "tools[0].function.name"},
      {{{"tools", {{{"type", "function"}, {"function", {{"name", "has space"}}}}}}}, "tools[0].function.name"},
      {{{"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "x"}}}}}}},
       "tools[0].function.parameters"},
      {{{"tools", {{{"type", "retrieval"}}}}}, "tools[0].type"},
      {{{"tools", {{{"function", {{"name", "f"}}}}, {{"function", {{"name", "f"}}}}}}}, "tools[1]"},
      {{{"tools", {{{"function", {{"name", "f"}}}}}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}},
       "tool_choice"},
      {{{"tools", {{{"function", {{"name", "f"}}}}}}, {"tool_choice", "sometimes"}}, "tool_choice"},
      {{{"tool_choice", "required"}}, "tool_choice"},
      {{{"functions", {{{"name", "f"}}}}}, "functions"},
      {{{"response_format", {{"type", "json_schema"}}}}, "response_format"},
      {{{"response_format", "json"}}, "response_format"},
      {{{"grammar", "root ::= \"a"}}, "grammar"},
      {{{"grammar", "root ::= \"a\""}, {"response_format", {{"type", "json_object"}}}}, "grammar"},
      {{{"json_schema", {{"type", "object"}}}, {"response_format", {{"type", "json_object"}}}}, "json_schema"},
      {{{"guided_json", {{"type", "object"}}}}, "guided_json"},
      {{{"guided_regex", "[a-z]+"}}, "guided_regex"},
  };
  for (const auto& [patch, field] : cases) {
    json body = kChat;
    body.update(patch);
    const absl::StatusOr<OpenAiRequest> request = ParseChatCompletionRequest(body);
    ASSERT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument) << body.dump();
    EXPECT_EQ(request.status().message().substr(0, field.size() + 1), field + ":") << request.status();
    EXPECT_EQ(ParamOf(request.status()), field);
  }
}

TEST(OpenAiParse, ConstraintsBecomeTheJobsGrammar) {
  json body = kChat;
  body["response_format"] = {{"type", "json_object"}};
  absl::StatusOr<OpenAiRequest> json_mode = ParseChatCompletionRequest(body);
  ASSERT_TRUE(json_mode.ok()) << json_mode.status();
  EXPECT_EQ(json_mode->job.grammar, kJsonObjectGrammar);
  body["response_format"] = {{"type", "text"}};
  EXPECT_EQ(ParseChatCompletionRequest(body)->job.grammar, "");
  body.erase("response_format");
  body["grammar"] = "root ::= [0-9]+";
  EXPECT_EQ(ParseChatCompletionRequest(body)->job.grammar, "root ::= [0-9]+");
  EXPECT_EQ(ParseOllamaGenerate({{"model", "m"}, {"format", "json"}})->grammar, kJsonObjectGrammar);
  EXPECT_EQ(ParseOllamaGenerate({{"model", "m"}, {"format", ""}})->grammar, "");
  EXPECT_TRUE(ParseOllamaGenerate({{"model", "m"}, {"format", {{"type", "object"}}}})->format_schema);
  body = kChat;
  body["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", "object"}}}}}};
  EXPECT_EQ(ParseChatCompletionRequest(body)->schema_path,
            (std::vector<std::string>{"response_format", "json_schema", "schema"}));
}

TEST(OpenAiParse, CompletionPromptForms) {
  json body = {{"model", "m"}, {"prompt", "Once"}};
  absl::StatusOr<OpenAiRequest> request = ParseCompletionRequest(body);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->job.prompt, "Once");
  EXPECT_EQ(request->job.sampling.max_tokens, kDefaultCompletionMaxTokens) << "OpenAI's default for completions";
  EXPECT_FALSE(request->job.chat);
  body["prompt"] = {"Twice"};
  EXPECT_EQ(ParseCompletionRequest(body)->job.prompt, "Twice");
  body["prompt"] = {1, 2, 3};
  EXPECT_EQ(ParseCompletionRequest(body)->job.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  body["prompt"] = {{4, 5}};
  EXPECT_EQ(ParseCompletionRequest(body)->job.prompt_tokens, (std::vector<int32_t>{4, 5}));
  body["prompt"] = {"a", "b"};
  EXPECT_EQ(ParamOf(ParseCompletionRequest(body).status()), "prompt") << "one prompt per request";
  body["prompt"] = {1, -2};
  EXPECT_EQ(ParamOf(ParseCompletionRequest(body).status()), "prompt");
  body["prompt"] = "";
  EXPECT_EQ(ParamOf(ParseCompletionRequest(body).status()), "prompt");
}

TEST(OpenAiParse, CompletionLogprobsAndRefusals) {
  json body = {{"model", "m"}, {"prompt", "x"}, {"logprobs", 0}};
  absl::StatusOr<OpenAiRequest> request = ParseCompletionRequest(body);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_TRUE(request->logprobs) << "logprobs 0: the chosen token's, no alternatives";
  EXPECT_EQ(request->job.sampling.top_logprobs, 0);
  body["logprobs"] = 6;
  EXPECT_EQ(ParamOf(ParseCompletionRequest(body).status()), "logprobs");
  body.erase("logprobs");
  for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{
           {"echo", true}, {"best_of", 2}, {"suffix", "end"}}) {
    json bad = body;
    bad[key] = value;
    EXPECT_EQ(ParamOf(ParseCompletionRequest(bad).status()), key) << bad.dump();
  }
}

TEST(OpenAiFormat, CompletionLogprobsCountOffsets) {
  GeneratedToken a{.id = 1, .text = "He", .logprob = -0.5, .top = {{1, -0.5, "He"}, {2, -1.5, "She"}}};
  GeneratedToken b{.id = 3, .text = "llo", .logprob = -0.25, .top = {}};
  const json logprobs = CompletionLogprobs({a, b}, 4);
  EXPECT_EQ(logprobs["tokens"], json({"He", "llo"}));
  EXPECT_EQ(logprobs["text_offset"], json({4, 6}));
  EXPECT_EQ(logprobs["top_logprobs"][0]["She"], -1.5);
  EXPECT_EQ(ChatLogprobEntry(a)["bytes"], json({72, 101}));
  EXPECT_EQ(OpenAiFinishReason("context"), "length");
  EXPECT_EQ(OpenAiUsage(JobStats{.prompt_tokens = 5, .generated_tokens = 7})["total_tokens"], 12);
  JobStats drafted{.prompt_tokens = 5, .generated_tokens = 9};
  drafted.draft_proposed = 10;
  drafted.draft_accepted = 6;
  const json usage = OpenAiUsage(drafted);
  EXPECT_EQ(usage["completion_tokens"], 9);
  EXPECT_EQ(usage["completion_tokens_details"]["accepted_prediction_tokens"], 6);
  EXPECT_EQ(usage["completion_tokens_details"]["rejected_prediction_tokens"], 4);
}

TEST(OllamaParse, DefaultsAreOllamas) {
  const absl::StatusOr<OllamaRequest> request = ParseOllamaGenerate({{"model", "m"}, {"prompt", "Hi"}});
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_TRUE(request->stream) << "Ollama streams unless told not to";
  const SamplingParams& s = request->sampling;
  EXPECT_EQ(s.temperature, 0.8);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_EQ(s.top_p, 0.9);
  EXPECT_EQ(s.min_p, 0.0);
  EXPECT_EQ(s.repeat_penalty, 1.1);
  EXPECT_EQ(s.max_tokens, -1);
}

TEST(OllamaParse, OptionsAndContext) {
  const json body = {{"model", "m"}, {"prompt", "Hi"}, {"system", "S"}, {"raw", true}, {"stream", false},
                     {"context", {1, 2}}, {"keep_alive", "5m"},
                     {"options", {{"temperature", 0}, {"seed", -1}, {"num_predict", -2}, {"stop", {"x"}},
                                  {"top_k", 3}, {"repeat_last_n", 8}, {"num_ctx", 2048}}}};
  const absl::StatusOr<OllamaRequest> request = ParseOllamaGenerate(body);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->sampling.temperature, 0);
  EXPECT_FALSE(request->sampling.seed.has_value()) << "seed -1 is random in Ollama";
  EXPECT_EQ(request->sampling.max_tokens, -1);
  EXPECT_EQ(request->sampling.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(request->sampling.top_k, 3);
  EXPECT_EQ(request->sampling.repeat_last_n, 8);
  EXPECT_EQ(request->context, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(request->raw);
  EXPECT_FALSE(request->stream);
  EXPECT_FALSE(request->unload);
  EXPECT_TRUE(ParseOllamaChat({{"model", "m"}, {"keep_alive", 0}})->unload);
  EXPECT_TRUE(ParseOllamaGenerate({{"model", "m"}, {"keep_alive", "0s"}})->unload);
}

TEST(OllamaParse, TemplateIsAFamilyByNameOrByText) {
  EXPECT_EQ(ParseOllamaChat({{"model", "m"}, {"template", "llama3"}})->chat_template, "llama3");
  EXPECT_EQ(ParseOllamaGenerate({{"model", "m"}, {"template", "{{ .Prompt }}<|im_end|>\n<|im_start|>assistant\n"}})
                ->chat_template,
            "chatml");
  EXPECT_EQ(ParseOllamaGenerate({{"model", "m"}, {"template", ""}})->chat_template, "") << "empty: the model's";
  EXPECT_EQ(ParseOllamaChat({{"model", "m"}})->chat_template, "");
  const std::string too_long(kMaxOllamaTemplateBytes + 1, ' ');
  const absl::Status status = ParseOllamaChat({{"model", "m"}, {"template", too_long}}).status();
  EXPECT_EQ(ParamOf(status), "template") << status;
}

TEST(OllamaParse, BadFieldsAreNamed) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"prompt", "x"}}, "model"},
      {{{"model", "m"}, {"options", 1}}, "options"},
      {{{"model", "m"}, {"options", {{"temperature", "x"}}}}, "options.temperature"},
      {{{"model", "m"}, {"options", {{"num_predict", -3}}}}, "options.num_predict"},
      {{{"model", "m"}, {"context", {"a"}}}, "context"},
      {{{"model", "m"}, {"format", 5}}, "format"},
      {{{"model", "m"}, {"format", "yaml"}}, "format"},
      {{{"model", "m"}, {"images", {"aGk="}}}, "images"},
      {{{"model", "m"}, {"keep_alive", true}}, "keep_alive"},
      {{{"model", "m"}, {"template", "alpaca"}}, "template"},
      {{{"model", "m"}, {"template", {"chatml"}}}, "template"},
  };
  for (const auto& [body, field] : cases) {
    const absl::StatusOr<OllamaRequest> request = ParseOllamaGenerate(body);
    ASSERT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument) << body.dump();
    EXPECT_EQ(ParamOf(request.status()), field) << request.status();
  }
  const json chat = {{"model", "m"}, {"messages", {{{"role", "robot"}, {"content", "x"}}}}};
  EXPECT_EQ(ParamOf(ParseOllamaChat(chat).status()), "messages[0].role");
  EXPECT_EQ(ParamOf(ParseOllamaChat({{"model", "m"}, {"messages", "hi"}}).status()), "messages");
}

TEST(OllamaFormat, TimestampsAreRfc3339Utc) {
  const std::string stamp = OllamaTimestamp();
  ASSERT_EQ(stamp.size(), 30u) << stamp;
  EXPECT_EQ(stamp[10], 'T');
  EXPECT_EQ(stamp.back(), 'Z');
  const json stats = OllamaDoneStats(JobStats{.prompt_tokens = 9, .cached_tokens = 4, .generated_tokens = 3,
                                              .prefill_seconds = 0.5, .decode_seconds = 0.25},
                                     1.0, 0.0);
  EXPECT_EQ(stats["prompt_eval_count"], 5) << "only the prompt tokens computed, not the cached";
  EXPECT_EQ(stats["eval_duration"], 250000000);
  EXPECT_EQ(stats["total_duration"], 1000000000);
}

}  // namespace
}  // namespace octo
