#include "daemon/chat/chat_template.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/chat/chat_families.h"

namespace octo {
namespace {

// How much of a template (or a role or name) an error message shows.
constexpr size_t kTemplateExcerptBytes = 80;

std::string KnownNamesList() { return absl::StrJoin(KnownChatTemplateNames(), ", "); }

// `text` on one line: control characters escaped (\n, \t, \xNN), all else
// (quotes, UTF-8) as is, so Jinja reads as it was written.
std::string EscapeControls(absl::string_view text) {
  std::string out;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (byte < 0x20 || byte == 0x7F) {
      absl::StrAppend(&out, "\\x", absl::Hex(byte, absl::kZeroPad2));
    } else {
      out += c;
    }
  }
  return out;
}

// The first kTemplateExcerptBytes of `text` (a template, or a role or name a
// client sent), not cutting a UTF-8 character.
std::string Excerpt(absl::string_view text) {
  if (text.size() <= kTemplateExcerptBytes) return EscapeControls(text);
  size_t cut = kTemplateExcerptBytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(EscapeControls(text.substr(0, cut)), "...");
}

bool Matches(const ChatFamily& family, absl::string_view text) {
  for (absl::string_view marker : family.markers) {
    if (!marker.empty() && !absl::StrContains(text, marker)) return false;
  }
  return family.unless.empty() || !absl::StrContains(text, family.unless);
}

// The first family whose markers `text` matches; nullptr when none does or
// the text is blank.
const ChatFamily* DetectFamily(absl::string_view text) {
  if (absl::StripAsciiWhitespace(text).empty()) return nullptr;
  for (const ChatFamily& family : ChatFamilies()) {
    if (Matches(family, text)) return &family;
  }
  return nullptr;
}

// Why DetectFamily found nothing in `text`.
std::string WhyNoFamily(absl::string_view text) {
  if (absl::StripAsciiWhitespace(text).empty()) {
    return "the model has no chat template (tokenizer.chat_template is missing or empty)";
  }
  return absl::StrCat("the model's chat template is not one we recognise (it begins \"", Excerpt(text), "\")");
}

const ChatFamily& FallbackFamily() {
  for (const ChatFamily& family : ChatFamilies()) {
    if (family.name == kFallbackChatTemplate) return family;
  }
  // The table has a chatml row; reaching here is a programmer error.
  std::fprintf(stderr, "%s:%d: the chat family table has no \"%s\" row\n", __FILE__, __LINE__,
               std::string(kFallbackChatTemplate).c_str());
  std::abort();
}

absl::StatusOr<ChatRole> ParseRole(absl::string_view role, size_t index) {
  if (role == "system") return ChatRole::kSystem;
  if (role == "user") return ChatRole::kUser;
  if (role == "assistant") return ChatRole::kAssistant;
  if (role == "tool") return ChatRole::kTool;
  return absl::InvalidArgumentError(absl::StrCat("message ", index, ": role \"", Excerpt(role),
                                                 "\" is not one of system, user, assistant, tool"));
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::Detect(absl::string_view jinja_template) {
  if (const ChatFamily* family = DetectFamily(jinja_template); family != nullptr) return ChatTemplate(family);
  return absl::NotFoundError(absl::StrCat(WhyNoFamily(jinja_template), "; name one of: ", KnownNamesList()));
}

ModelChatTemplate ChatTemplate::ForModel(absl::string_view jinja_template) {
  if (const ChatFamily* family = DetectFamily(jinja_template); family != nullptr) {
    return {ChatTemplate(family), std::string()};
  }
  return {ChatTemplate(&FallbackFamily()),
          absl::StrCat(WhyNoFamily(jinja_template), "; it chats in ", kFallbackChatTemplate,
                       " (llama.cpp's default) unless a request names one of: ", KnownNamesList())};
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromName(absl::string_view name) {
  absl::string_view wanted = name;
  for (const ChatFamilyAlias& alias : ChatFamilyAliases()) {
    if (alias.alias == name) wanted = alias.name;
  }
  for (const ChatFamily& family : ChatFamilies()) {
    if (family.name == wanted) return ChatTemplate(&family);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown chat template \"", Excerpt(name),
                                                 "\"; known: ", KnownNamesList()));
}

absl::StatusOr<std::string> ChatTemplate::Apply(std::span<const ChatMessage> messages,
                                                bool add_generation_prompt) const {
  std::vector<ChatTurn> turns;
  turns.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const absl::StatusOr<ChatRole> role = ParseRole(messages[i].role, i);
    if (!role.ok()) return role.status();
    turns.push_back({*role, messages[i].content});
  }
  return RenderTurns(family_->style, family_->name, turns, add_generation_prompt);
}

absl::string_view ChatTemplate::name() const { return family_->name; }

bool ChatTemplate::renders_bos() const { return !family_->style.bos.empty(); }

ToolFormat ChatTemplate::tool_format() const { return family_->tools; }

std::vector<std::string> KnownChatTemplateNames() {
  std::vector<std::string> names;
  for (const ChatFamily& family : ChatFamilies()) names.emplace_back(family.name);
  for (const ChatFamilyAlias& alias : ChatFamilyAliases()) names.emplace_back(alias.alias);
  return names;
}

}  // namespace octo
