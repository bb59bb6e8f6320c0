#include "daemon/chat/turn_style.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace octo {
namespace {

absl::string_view RoleName(ChatRole role) {
  switch (role) {
    case ChatRole::kSystem: return "system";
    case ChatRole::kUser: return "user";
    case ChatRole::kAssistant: return "assistant";
    case ChatRole::kTool: return "tool";
  }
  return "?";
}

absl::string_view Content(const TurnAffixes& affixes, absl::string_view content) {
  return affixes.trim ? absl::StripAsciiWhitespace(content) : content;
}

// Checks the conversation against the style's rules and returns the index
// of the user message that carries a folded system message (if any).
absl::StatusOr<std::optional<size_t>> CheckShape(const TurnStyle& style, absl::string_view family,
                                                 std::span<const ChatTurn> turns) {
  const bool folds = style.system_placement != SystemPlacement::kOwnTurn;
  const bool has_system = !turns.empty() && turns[0].role == ChatRole::kSystem;
  const size_t first = has_system ? 1 : 0;  // first message after the optional system one
  for (size_t i = first; i < turns.size(); ++i) {
    const ChatRole role = turns[i].role;
    if (role == ChatRole::kSystem && folds) {
      return absl::InvalidArgumentError(absl::StrCat(
          "message ", i, ": the ", family, " chat format has no system role; a system message may only come first"));
    }
    // Tool results answer the assistant's calls in a user message's place;
    // several in a row are one such place.
    const ChatRole previous = i > first ? turns[i - 1].role : ChatRole::kAssistant;
    if (role == ChatRole::kTool && previous == ChatRole::kTool) continue;
    const ChatRole expected = previous == ChatRole::kAssistant ? ChatRole::kUser : ChatRole::kAssistant;
    const ChatRole as = role == ChatRole::kTool ? ChatRole::kUser : role;
    if (style.alternate && as != expected) {
      return absl::InvalidArgumentError(absl::StrCat("message ", i, ": the ", family,
                                                     " chat format needs user and assistant messages to alternate, "
                                                     "starting with user, after an optional system message; expected ",
                                                     RoleName(expected), ", got ", RoleName(role)));
    }
  }
  if (!has_system || !folds) return std::optional<size_t>();

  std::optional<size_t> carrier;
  for (size_t i = first; i < turns.size(); ++i) {
    if (turns[i].role != ChatRole::kUser) continue;
    carrier = i;
    if (style.system_placement == SystemPlacement::kFoldIntoFirstUser) break;
  }
  if (!carrier.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("the ", family,
                                                   " chat format has no system role and folds the system message "
                                                   "into a user message, but there is none"));
  }
  return carrier;
}

}  // namespace

absl::StatusOr<std::string> RenderTurns(const TurnStyle& style, absl::string_view family,
                                        std::span<const ChatTurn> turns, bool add_generation_prompt) {
  const absl::StatusOr<std::optional<size_t>> carrier = CheckShape(style, family, turns);
  if (!carrier.ok()) return carrier.status();

  std::string out;
  if (!style.bos_before_each_user) absl::StrAppend(&out, style.bos);
  for (size_t i = 0; i < turns.size(); ++i) {
    const ChatTurn& turn = turns[i];
    switch (turn.role) {
      case ChatRole::kSystem:
        if (style.system_placement != SystemPlacement::kOwnTurn) break;  // folded into *carrier
        absl::StrAppend(&out, style.system.prefix, Content(style.system, turn.content), style.system.suffix);
        break;
      case ChatRole::kUser:
        if (style.bos_before_each_user) absl::StrAppend(&out, style.bos);
        absl::StrAppend(&out, style.user.prefix);
        if (carrier->has_value() && **carrier == i) {
          absl::StrAppend(&out, style.system.prefix, Content(style.system, turns[0].content), style.system.suffix);
        }
        absl::StrAppend(&out, Content(style.user, turn.content), style.user.suffix);
        break;
      case ChatRole::kAssistant:
        absl::StrAppend(&out, style.assistant.prefix, Content(style.assistant, turn.content), style.assistant.suffix);
        break;
      case ChatRole::kTool: {
        const bool own = !style.tool.prefix.empty() || !style.tool.suffix.empty();
        const TurnAffixes& affixes = own ? style.tool : style.user;
        if (!own && style.bos_before_each_user) absl::StrAppend(&out, style.bos);
        absl::StrAppend(&out, affixes.prefix, Content(affixes, turn.content), affixes.suffix);
        break;
      }
    }
  }
  if (add_generation_prompt) absl::StrAppend(&out, style.generation_prompt);
  return out;
}

}  // namespace octo
