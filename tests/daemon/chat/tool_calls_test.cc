// Tool calling per family: calls written into a history parse back as the
// same calls, the grammar of a required or named call takes exactly the
// well-formed calls whose arguments satisfy the function's schema, content
// around calls is kept, and a stream holds back only what may be a call.
#include "daemon/chat/tool_calls.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "daemon/chat/chat_template.h"
#include "daemon/chat/tool_chat.h"
#include "daemon/grammar/grammar_matcher.h"
#include "gtest/gtest.h"

namespace octo {
namespace {

using ojson = nlohmann::ordered_json;

const ToolFormat kFormats[] = {ToolFormat::kGenericJson, ToolFormat::kHermes, ToolFormat::kLlama3,
                               ToolFormat::kMistral};

std::vector<ToolFunction> Tools() {
  ToolFunction weather{"get_weather", "The weather in a city now", ojson::parse(R"j({
      "type": "object",
      "properties": {"city": {"type": "string", "maxLength": 20},
                     "unit": {"enum": ["C", "F"]}},
      "required": ["city"]})j")};
  // A recursive parameter through $defs, and a $ref to the schema's root.
  ToolFunction tree{"make_tree", "", ojson::parse(R"j({
      "type": "object",
      "properties": {"root": {"$ref": "#/$defs/node"}},
      "required": ["root"],
      "$defs": {"node": {"type": "object",
                         "properties": {"label": {"type": "integer"},
                                        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                         "required": ["label"]}}})j")};
  return {weather, tree, {"ping", "", ojson::object()}};
}

bool Matches(const std::string& grammar_text, const std::string& text) {
  absl::StatusOr<Grammar> grammar = Grammar::Parse(grammar_text);
  EXPECT_TRUE(grammar.ok()) << grammar.status() << "\n" << grammar_text;
  if (!grammar.ok()) return false;
  GrammarMatcher matcher(std::make_shared<const Grammar>(*std::move(grammar)));
  return matcher.Accept(text) && matcher.CanEnd();
}

// The text of `calls` a grammar-held reply writes: the rendered calls less
// Mistral's control token, which no grammar writes (tool_calls.h).
std::string Written(ToolFormat format, const std::vector<ToolCall>& calls) {
  std::string text = RenderToolCalls(format, calls);
  if (format == ToolFormat::kMistral) text = text.substr(std::string("[TOOL_CALLS] ").size());
  return text;
}

TEST(ToolCalls, RenderedCallsParseBackAsTheSameCalls) {
  for (const ToolFormat format : kFormats) {
    std::vector<ToolCall> calls = {{"", "get_weather", R"({"city":"Paris","unit":"C"})"}};
    if (format != ToolFormat::kLlama3) calls.push_back({"", "ping", "{}"});
    const ParsedReply parsed = ParseToolCalls(format, RenderToolCalls(format, calls));
    ASSERT_EQ(parsed.calls.size(), calls.size()) << ToolFormatName(format);
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(parsed.calls[i].name, calls[i].name);
      EXPECT_EQ(parsed.calls[i].arguments, calls[i].arguments);
    }
    EXPECT_EQ(parsed.content, "") << ToolFormatName(format);
  }
}

TEST(ToolCalls, RequiredCallGrammarTakesValidCallsOnly) {
  const std::vector<ToolFunction> tools = Tools();
  for (const ToolFormat format : kFormats) {
    SCOPED_TRACE(std::string(ToolFormatName(format)));
    absl::StatusOr<std::string> grammar = ToolCallGrammar(format, tools, {ToolChoice::Mode::kRequired});
    ASSERT_TRUE(grammar.ok()) << grammar.status();
    EXPECT_TRUE(Matches(*grammar, Written(format, {{"", "get_weather", R"({"city":"Oslo"})"}})));
    EXPECT_TRUE(Matches(*grammar, Written(format, {{"", "ping", "{}"}})));
    EXPECT_TRUE(Matches(
        *grammar, Written(format, {{"", "make_tree", R"({"root":{"label":1,"children":[{"label":2,"children":[]}]}})"}})));
    // The schema decides: a missing required argument, a value out of its
    // enum, a string too long, an unknown function.
    EXPECT_FALSE(Matches(*grammar, Written(format, {{"", "get_weather", R"({"unit":"C"})"}})));
    EXPECT_FALSE(Matches(*grammar, Written(format, {{"", "get_weather", R"({"city":"Oslo","unit":"K"})"}})));
    EXPECT_FALSE(Matches(*grammar, Written(format, {{"", "get_weather", R"({"city":"Llanfairpwllgwyngyllgogerychwyrndrobwll"})"}})));
    EXPECT_FALSE(Matches(*grammar, Written(format, {{"", "launch", "{}"}})));
    EXPECT_FALSE(Matches(*grammar, "Sure, let me check."));
    if (format != ToolFormat::kLlama3) {
      EXPECT_TRUE(Matches(*grammar, Written(format, {{"", "ping", "{}"}, {"", "get_weather", R"({"city":"Rome"})"}})));
    }
    // A named function: only it; one call when parallel calls are off.
    absl::StatusOr<std::string> named =
        ToolCallGrammar(format, tools, {ToolChoice::Mode::kNamed, "get_weather", /*parallel=*/false});
    ASSERT_TRUE(named.ok()) << named.status();
    EXPECT_TRUE(Matches(*named, Written(format, {{"", "get_weather", R"({"city":"Oslo"})"}})));
    EXPECT_FALSE(Matches(*named, Written(format, {{"", "ping", "{}"}})));
    EXPECT_FALSE(Matches(*named, Written(format, {{"", "get_weather", R"({"city":"A"})"}, {"", "get_weather", R"({"city":"B"})"}})));
  }
}

TEST(ToolCalls, AFunctionSchemaTheGrammarCannotHoldIsNamed) {
  std::vector<ToolFunction> tools = Tools();
  tools.push_back({"bad", "", ojson::parse(R"({"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}}})")});
  const absl::StatusOr<std::string> grammar = ToolCallGrammar(ToolFormat::kHermes, tools, {ToolChoice::Mode::kRequired});
  ASSERT_EQ(grammar.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(grammar.status().message(), "tools[3].function.parameters: ")) << grammar.status();
  EXPECT_TRUE(absl::StrContains(grammar.status().message(), "multipleOf")) << grammar.status();
  EXPECT_EQ(ToolCallGrammar(ToolFormat::kHermes, Tools(), {ToolChoice::Mode::kNamed, "absent"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// auto's lazy grammar: free text passes untouched; from the tag on, only
// a well-formed call to a known function with valid arguments.
TEST(ToolCalls, AutosLazyGrammarHoldsOnlyWhatFollowsTheCallTag) {
  const std::vector<ToolFunction> tools = Tools();
  const std::string lazy = LazyToolCallGrammar(ToolFormat::kHermes, tools, {});
  ASSERT_FALSE(lazy.empty());
  EXPECT_TRUE(Matches(lazy, ""));
  EXPECT_TRUE(Matches(lazy, "It is sunny. <b>Bold</b> a < b, <tool"));
  EXPECT_TRUE(Matches(lazy, "Checking.\n" + Written(ToolFormat::kHermes, {{"", "get_weather", R"({"city":"Oslo"})"}})));
  EXPECT_TRUE(Matches(lazy, Written(ToolFormat::kHermes, {{"", "ping", "{}"}, {"", "make_tree", R"({"root":{"label":3}})"}})));
  EXPECT_FALSE(Matches(lazy, "<tool_call>\n{\"name\": \"launch\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(Matches(lazy, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"C\"}}\n</tool_call>"));
  EXPECT_FALSE(Matches(lazy, "<tool_call>not JSON"));
  EXPECT_FALSE(Matches(lazy, "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}"))
      << "a call ends with its closing tag";
  // Formats whose calls a grammar cannot see start: none.
  for (const ToolFormat format : {ToolFormat::kGenericJson, ToolFormat::kLlama3, ToolFormat::kMistral}) {
    EXPECT_EQ(LazyToolCallGrammar(format, tools, {}), "") << ToolFormatName(format);
  }
}

TEST(ToolCalls, ContentAroundCallsIsKeptAndBrokenCallsStayContent) {
  const ParsedReply hermes = ParseToolCalls(
      ToolFormat::kHermes, "Let me look.\n<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(hermes.calls.size(), 1u);
  EXPECT_EQ(hermes.content, "Let me look.\n");
  // Arguments given as JSON text, as some models write them.
  const ParsedReply text_args =
      ParseToolCalls(ToolFormat::kHermes, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>");
  ASSERT_EQ(text_args.calls.size(), 1u);
  EXPECT_EQ(text_args.calls[0].arguments, "{\"a\":1}");
  // Cut short by max_tokens, or not a call at all: content, no calls.
  for (const auto& [format, text] : std::vector<std::pair<ToolFormat, std::string>>{
           {ToolFormat::kHermes, "<tool_call>\n{\"name\": \"ping\", \"argu"},
           {ToolFormat::kLlama3, "{\"answer\": 42}"},
           {ToolFormat::kMistral, "[1, 2, 3]"},
           {ToolFormat::kGenericJson, "{\"tool_calls\": []}"},
           {ToolFormat::kGenericJson, "Plain words."}}) {
    const ParsedReply parsed = ParseToolCalls(format, text);
    EXPECT_TRUE(parsed.calls.empty()) << text;
    EXPECT_EQ(parsed.content, text);
  }
  const ParsedReply mistral = ParseToolCalls(ToolFormat::kMistral, " [{\"name\": \"ping\", \"arguments\": {}}]");
  EXPECT_EQ(mistral.calls.size(), 1u) << "the [TOOL_CALLS] control token is not in the text";
  const ParsedReply python_tag =
      ParseToolCalls(ToolFormat::kLlama3, "<|python_tag|>{\"name\": \"ping\", \"parameters\": {}}");
  EXPECT_EQ(python_tag.calls.size(), 1u);
}

TEST(ToolCalls, AStreamHoldsOnlyWhatMayBeACall) {
  EXPECT_EQ(ToolCallHold(ToolFormat::kHermes, "Hello"), 5u);
  EXPECT_EQ(ToolCallHold(ToolFormat::kHermes, "Hello <tool"), 6u);
  EXPECT_EQ(ToolCallHold(ToolFormat::kHermes, "Hello <b>"), 9u);
  EXPECT_EQ(ToolCallHold(ToolFormat::kHermes, "Hi <tool_call>{"), 3u);
  EXPECT_EQ(ToolCallHold(ToolFormat::kLlama3, "  "), 0u);
  EXPECT_EQ(ToolCallHold(ToolFormat::kLlama3, " {\"na"), 0u);
  EXPECT_EQ(ToolCallHold(ToolFormat::kLlama3, "The answer"), 10u);
  EXPECT_EQ(ToolCallHold(ToolFormat::kMistral, "[TOOL"), 0u);
  EXPECT_EQ(ToolCallHold(ToolFormat::kMistral, "Sure [TOOL_CALLS] ["), 5u);
  EXPECT_EQ(ToolCallHold(ToolFormat::kGenericJson, "{"), 0u);
}

TEST(ToolCalls, AConversationWithToolsRendersInItsFamilysFormat) {
  const std::vector<ToolFunction> tools = Tools();
  const std::vector<ToolChatMessage> messages = {
      {"user", "Weather in Paris?"},
      {"assistant", "", {{"call_1", "get_weather", R"({"city":"Paris"})"}}},
      {"tool", "18 C", {}, "call_1"},
  };
  // chatml (Qwen, Hermes): the list in the system message, the call in
  // <tool_call> tags, the result in <tool_response> tags in a user turn.
  const std::vector<ChatMessage> chatml = ToolChatMessages(ToolFormat::kHermes, tools, {}, messages);
  ASSERT_EQ(chatml.size(), 4u);
  EXPECT_EQ(chatml[0].role, "system");
  EXPECT_TRUE(absl::StrContains(chatml[0].content, "<tools>\n{\"type\":\"function\",\"function\":{\"name\":\"get_weather\""));
  const absl::StatusOr<std::string> qwen = ChatTemplate::FromName("chatml")->Apply(chatml, true);
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  EXPECT_TRUE(absl::StrContains(*qwen, "<|im_start|>assistant\n<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call><|im_end|>\n"
                                       "<|im_start|>user\n<tool_response>\n18 C\n</tool_response><|im_end|>\n"
                                       "<|im_start|>assistant\n")) << *qwen;
  // Llama 3: the result in the ipython role.
  const absl::StatusOr<std::string> llama =
      ChatTemplate::FromName("llama3")->Apply(ToolChatMessages(ToolFormat::kLlama3, tools, {}, messages), true);
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_TRUE(absl::StrContains(*llama, "<|start_header_id|>ipython<|end_header_id|>\n\n18 C<|eot_id|>")) << *llama;
  // Mistral alternates user and assistant; tool results take a user's place.
  std::vector<ToolChatMessage> two_results = messages;
  two_results[1].calls.push_back({"call_2", "ping", "{}"});
  two_results.push_back({"tool", "pong", {}, "call_2"});
  two_results.push_back({"assistant", "18 C in Paris."});
  two_results.push_back({"user", "Thanks"});
  const absl::StatusOr<std::string> mistral =
      ChatTemplate::FromName("mistral-v3")->Apply(ToolChatMessages(ToolFormat::kMistral, tools, {}, two_results), true);
  ASSERT_TRUE(mistral.ok()) << mistral.status();
  EXPECT_TRUE(absl::StrContains(*mistral, "[TOOL_RESULTS] 18 C[/TOOL_RESULTS][TOOL_RESULTS] pong[/TOOL_RESULTS]"))
      << *mistral;
  EXPECT_TRUE(absl::StrContains(*mistral, "[AVAILABLE_TOOLS] [")) << *mistral;
  // A family without tool role: the result, named, in a user message.
  const std::vector<ChatMessage> generic = ToolChatMessages(ToolFormat::kGenericJson, tools, {}, messages);
  EXPECT_EQ(generic.back().role, "tool");
  EXPECT_EQ(generic.back().content, "The tool get_weather returned: 18 C");
  const absl::StatusOr<std::string> gemma = ChatTemplate::FromName("gemma")->Apply(generic, true);
  ASSERT_TRUE(gemma.ok()) << gemma.status();
  EXPECT_TRUE(absl::StrContains(*gemma, "<start_of_turn>user\nThe tool get_weather returned: 18 C<end_of_turn>\n"))
      << *gemma;
  // tool_choice none: no list; the history's calls are still written.
  const std::vector<ChatMessage> none = ToolChatMessages(ToolFormat::kHermes, tools, {ToolChoice::Mode::kNone}, messages);
  EXPECT_EQ(none.size(), 3u);
  EXPECT_TRUE(absl::StrContains(none[1].content, "<tool_call>"));
}

}  // namespace
}  // namespace octo
