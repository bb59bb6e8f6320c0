// The chat formats we know: one table row per family, with the text that
// recognises its Jinja template and the TurnStyle that renders it. Adding a
// family is adding a row (chat_families.cc) and a test of its exact output.
#pragma once

#include <array>
#include <span>

#include "absl/strings/string_view.h"
#include "daemon/chat/tool_calls.h"
#include "daemon/chat/turn_style.h"

namespace octo {

struct ChatFamily {
  absl::string_view name = {};     // what FromName accepts, e.g. "chatml"
  absl::string_view used_by = {};  // models known to ship this template
  // Detection: a Jinja template is this family when it contains every
  // non-empty `markers` entry and does not contain `unless` (if non-empty).
  // Rows are tried in table order, so a more specific row comes first.
  std::array<absl::string_view, 3> markers = {};
  absl::string_view unless = {};
  TurnStyle style = {};
  ToolFormat tools = ToolFormat::kGenericJson;  // how its models call tools
};

// Every family, in detection order.
std::span<const ChatFamily> ChatFamilies();

// Another name for a family, e.g. "mistral" for "mistral-v3".
struct ChatFamilyAlias {
  absl::string_view alias;
  absl::string_view name;
};
std::span<const ChatFamilyAlias> ChatFamilyAliases();

}  // namespace octo
