// A conversation with tools as the chat template renders it: the tool list
// goes into the system message, an assistant's calls into its content in
// the family's call syntax, and each tool's result into a "tool" message
// (tool_calls.h has the formats).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "daemon/chat/chat_template.h"
#include "daemon/chat/tool_calls.h"

namespace octo {

// A message as the APIs send it.
struct ToolChatMessage {
  std::string role{};  // system, user, assistant, tool
  std::string content{};
  std::vector<ToolCall> calls{};  // an assistant's calls
  std::string tool_call_id{};     // a tool message: the call it answers (OpenAI)
  std::string tool_name{};        // a tool message: the function (Ollama's tool_name); else found by tool_call_id
};

// The messages the template renders. `tools` empty or choice kNone: no
// tool list (calls and results in the history are still written).
std::vector<ChatMessage> ToolChatMessages(ToolFormat format, std::span<const ToolFunction> tools,
                                          const ToolChoice& choice, std::span<const ToolChatMessage> messages);

}  // namespace octo
