// Tool calling, per chat family: the tool list written into the prompt,
// earlier calls and their results written back into the history, the
// grammar that holds a reply to a well-formed call, and the calls parsed
// out of what a model wrote.
//
// Each family calls tools in the format its models were trained on:
//   kHermes     Qwen 2.5/3, Hermes and other chatml models:
//                 <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
//               (one block per call); results in <tool_response> tags.
//   kLlama3     Llama 3.x: the whole reply is {"name": ..., "parameters": {...}}
//               (one call); results in the ipython role.
//   kMistral    Mistral v3/v7: [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]
//               ([TOOL_CALLS] is a control token, so the text may start at
//               the "["); tools in [AVAILABLE_TOOLS], results in [TOOL_RESULTS].
//   kGenericJson  every other family: the whole reply is
//               {"tool_calls": [{"name": ..., "arguments": {...}}, ...]};
//               results come back as user messages.
// The prompt text is ours (the formats are the models'; the prose around
// them is not any template's), so a model sees its own call syntax.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace octo {

enum class ToolFormat { kGenericJson, kHermes, kLlama3, kMistral };

// The name a family's ToolFormat goes by in logs and tests.
absl::string_view ToolFormatName(ToolFormat format);

inline constexpr size_t kMaxTools = 128;
inline constexpr size_t kMaxToolNameBytes = 64;
// The most calls a grammar-held reply makes (a random model would go on).
inline constexpr int kMaxParallelToolCalls = 8;

// A function the model may call (OpenAI's tools[].function, Ollama's too).
struct ToolFunction {
  std::string name;  // 1-64 of [A-Za-z0-9_-], as OpenAI allows
  std::string description;
  nlohmann::ordered_json parameters = nlohmann::ordered_json::object();  // a JSON Schema, in written order
};

// A call: made by the model (parsed), or sent back in the history.
struct ToolCall {
  std::string id;         // OpenAI's tool_call_id; "" when the client gave none
  std::string name;
  std::string arguments;  // a JSON object's text
};

struct ToolChoice {
  enum class Mode { kAuto, kNone, kRequired, kNamed };
  Mode mode = Mode::kAuto;
  std::string name{};  // kNamed
  // More than one call in a reply may be made (OpenAI's
  // parallel_tool_calls); kLlama3 makes one whatever this says.
  bool parallel = true;
};

// INVALID_ARGUMENT unless `name` is a function name OpenAI would accept.
absl::Status CheckToolName(absl::string_view name);

// The text that tells the model about `tools`, to go first in the system
// message (a new one when the chat has none).
std::string ToolListPrompt(ToolFormat format, std::span<const ToolFunction> tools, const ToolChoice& choice);

// An assistant message's calls as the model writes them, to follow its
// content (if any) in the history.
std::string RenderToolCalls(ToolFormat format, std::span<const ToolCall> calls);

// A tool's result as the content of a "tool" message. Families with a tool
// role (TurnStyle::tool) wrap it themselves; for the others it is labelled
// with the function's name, as it goes in a user message.
std::string ToolResultContent(ToolFormat format, absl::string_view name, absl::string_view content);

// A grammar (GBNF) whose every match is a call (or, with choice.parallel,
// up to kMaxParallelToolCalls calls) to one of `tools` (kRequired) or to choice.name (kNamed), with
// arguments that satisfy the function's parameters schema.
// INVALID_ARGUMENT naming "tools[i].function.parameters" when a schema
// cannot be held to (json_schema.h), or "tool_choice" when it names no tool.
absl::StatusOr<std::string> ToolCallGrammar(ToolFormat format, std::span<const ToolFunction> tools,
                                            const ToolChoice& choice);

// tool_choice auto's grammar (a lazy one): any text, but from the format's
// call tag on, well-formed calls as ToolCallGrammar holds them, so a model
// that starts a call writes a valid one. Only for formats whose calls open
// with a tag a grammar can see (kHermes: Mistral's [TOOL_CALLS] is a control
// token, and a JSON-first reply may be an answer); "" for the others, and
// when a function's schema cannot be held to (the calls are parsed as the
// model writes them then).
std::string LazyToolCallGrammar(ToolFormat format, std::span<const ToolFunction> tools, const ToolChoice& choice);

struct ParsedReply {
  std::string content;          // what the model wrote besides its calls
  std::vector<ToolCall> calls;  // ids empty: the caller gives them
};

// The calls in a whole reply. Text that looks like a call but does not
// parse as one (cut short by max_tokens, bad JSON) stays content.
ParsedReply ParseToolCalls(ToolFormat format, absl::string_view text);

// Where a call may begin in a reply streamed so far: content before it can
// be sent now, the rest must wait for the end (text.size(): nothing held).
size_t ToolCallHold(ToolFormat format, absl::string_view text);

}  // namespace octo
