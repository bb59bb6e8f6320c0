// Tool calling as the OpenAI and Ollama chat APIs spell it: the tool list
// and tool_choice of a request, the calls and results in its messages, and
// the calls of a reply (tool_calls.h does the per-family work).
//
//   tools              [{"type": "function", "function": {"name", "description",
//                        "parameters" (a JSON Schema), "strict"}}]  (both APIs)
//   tool_choice        "auto" (default), "none", "required", or
//                      {"type": "function", "function": {"name": ...}}  (OpenAI)
//   parallel_tool_calls  true (default) or false  (OpenAI)
//   messages[].tool_calls  OpenAI: [{"id", "type": "function", "function":
//                        {"name", "arguments": "<JSON text>"}}]; Ollama: the
//                        same with "arguments" an object and no id
//   tool messages      {"role": "tool", "content", "tool_call_id" (OpenAI) |
//                        "tool_name" (Ollama)}
// "required" and a named function hold the reply to a call by grammar, so
// even a small model's call is well formed and its arguments satisfy the
// function's schema; "auto" parses what the model writes.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "daemon/chat/tool_chat.h"
#include "daemon/core/runtime.h"
#include "nlohmann/json.hpp"

namespace octo {

class FieldReader;

struct ToolFields {
  std::vector<ToolFunction> tools;
  ToolChoice choice;
  // Tools are offered: listed in the prompt and parsed out of the reply.
  bool offered() const { return !tools.empty() && choice.mode != ToolChoice::Mode::kNone; }
};

// tools, and for OpenAI tool_choice and parallel_tool_calls; `body` is the
// request's text, read again so each function's parameters keep their
// written order. INVALID_ARGUMENT naming the field (a tool without a name,
// a tool_choice naming no tool, ...).
absl::Status ReadTools(const FieldReader& fields, absl::string_view body, bool openai, ToolFields* out);

// A message's tool_calls (an assistant's) into *calls; OpenAI's arguments
// are JSON text, Ollama's an object.
absl::Status ReadToolCalls(const FieldReader& message, bool openai, std::vector<ToolCall>* calls);

// The job's messages for a chat in `format`, and when the choice forces a
// call its grammar (INVALID_ARGUMENT when the request holds the reply to
// another constraint too, or a schema cannot be held to).
absl::Status PrepareToolChat(const ToolFields& tools, std::span<const ToolChatMessage> messages, ToolFormat format,
                             GenerateJob* job);

// The format the request's chat runs in: its template's (a family name),
// else the model's.
ToolFormat ToolFormatFor(const ModelSummary& model, const std::string& chat_template);

// A new call id ("call_" and 24 random letters and digits).
std::string NewToolCallId();

// A reply's calls: OpenAI's message.tool_calls (arguments as JSON text;
// with `index` for stream deltas), Ollama's message.tool_calls.
nlohmann::json OpenAiToolCalls(std::span<const ToolCall> calls, bool with_index);
nlohmann::json OllamaToolCalls(std::span<const ToolCall> calls);

}  // namespace octo
