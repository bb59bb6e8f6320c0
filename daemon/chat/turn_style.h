// TurnStyle: a chat format written down as data, and the one renderer that
// turns messages into prompt text with it.
//
// Every family we support writes a conversation the same way: optional BOS
// text, then each message as prefix + content + suffix for its role, then a
// generation prompt that opens the assistant's turn. They differ in the
// affixes, in whether content is trimmed, and in what happens to a system
// message when the model has no system role. A family is one TurnStyle in
// chat_families.cc.
#pragma once

#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace octo {

// kTool: a tool's result, sent back after the assistant called it.
enum class ChatRole { kSystem, kUser, kAssistant, kTool };

struct ChatTurn {
  ChatRole role;
  absl::string_view content;
};

// What one role's message looks like: prefix + content + suffix.
struct TurnAffixes {
  absl::string_view prefix = {};
  absl::string_view suffix = {};
  bool trim = false;  // strip ASCII whitespace around the content (Jinja `| trim`, `.strip()`)
};

// Where a system message goes.
enum class SystemPlacement {
  kOwnTurn,           // written in place with the system affixes
  kFoldIntoFirstUser, // no system role: system prefix + text + suffix opens the first user message
  kFoldIntoLastUser,  // ... opens the last user message (Mistral v3's templates)
};

struct TurnStyle {
  absl::string_view bos = {};          // BOS token text the template renders; "" when none
  bool bos_before_each_user = false;   // true: bos opens every user turn (Llama 2), not the prompt
  TurnAffixes system = {};
  TurnAffixes user = {};
  TurnAffixes assistant = {};
  // A tool's result; a style without tool affixes writes it as a user
  // message. Where roles alternate, a run of tool results takes a user
  // message's place.
  TurnAffixes tool = {};
  absl::string_view generation_prompt = {};  // opens the assistant's turn; "" for formats whose user turn does
  SystemPlacement system_placement = SystemPlacement::kOwnTurn;
  // The template refuses anything but user/assistant alternating, starting
  // with user, after an optional leading system message.
  bool alternate = false;
};

// Renders `turns` in `style`. INVALID_ARGUMENT, naming the message and
// `family`, when the conversation breaks the style's rules: a system
// message anywhere but first in a folding style, a folded system message
// with no user message to carry it, or roles that do not alternate where
// the style requires it.
absl::StatusOr<std::string> RenderTurns(const TurnStyle& style, absl::string_view family,
                                        std::span<const ChatTurn> turns, bool add_generation_prompt);

}  // namespace octo
