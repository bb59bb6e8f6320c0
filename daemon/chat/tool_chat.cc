#include "daemon/chat/tool_chat.h"

#include <map>

#include "absl/strings/str_cat.h"

namespace octo {

std::vector<ChatMessage> ToolChatMessages(ToolFormat format, std::span<const ToolFunction> tools,
                                          const ToolChoice& choice, std::span<const ToolChatMessage> messages) {
  std::vector<ChatMessage> out;
  std::map<std::string, std::string> names;  // tool_call_id -> function
  for (const ToolChatMessage& message : messages) {
    std::string content = message.content;
    if (!message.calls.empty()) {
      for (const ToolCall& call : message.calls) {
        if (!call.id.empty()) names[call.id] = call.name;
      }
      const std::string calls = RenderToolCalls(format, message.calls);
      content = content.empty() ? calls : absl::StrCat(content, "\n", calls);
    }
    if (message.role == "tool") {
      std::string name = message.tool_name;
      if (auto it = names.find(message.tool_call_id); name.empty() && it != names.end()) name = it->second;
      content = ToolResultContent(format, name, content);
    }
    out.push_back({message.role, std::move(content)});
  }
  if (tools.empty() || choice.mode == ToolChoice::Mode::kNone) return out;
  const std::string list = ToolListPrompt(format, tools, choice);
  if (!out.empty() && out.front().role == "system") {
    out.front().content = absl::StrCat(list, "\n\n", out.front().content);
  } else {
    out.insert(out.begin(), ChatMessage{"system", list});
  }
  return out;
}

}  // namespace octo
