// Chat templates: a conversation (role, content messages) -> prompt text.
//
// A GGUF carries its chat format as a Jinja template in
// `tokenizer.chat_template`. We do not run Jinja. Detect() recognises the
// family from marker text in the template, as llama.cpp's built-in templates
// do, and the family's table row (chat_families.cc) renders the prompt.
// When the template is missing or not recognised, the model chats in
// chatml, as llama.cpp does (ForModel, with a notice saying why), and a
// request may name another family (FromName; the names are
// KnownChatTemplateNames()).
//
// BOS: Apply's output includes the BOS token's text wherever the real
// template renders it (e.g. Llama 3's "<|begin_of_text|>", Llama 2's "<s>"
// before every user turn, Gemma's "<bos>"). renders_bos() says so; the
// caller then tokenizes the prompt with special tokens recognised and
// without adding BOS itself (add_special = false), or the model would see
// two. When renders_bos() is false, tokenize as for plain text (the
// tokenizer adds BOS if the model asks for it).
//
// ChatTemplate is a small value (a pointer into the static family table):
// copy it freely and use it from any thread.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/chat/tool_calls.h"

namespace octo {

struct ChatFamily;
struct ModelChatTemplate;

// The family a model chats in when its own template is missing or not one
// we recognise: llama.cpp's default.
inline constexpr absl::string_view kFallbackChatTemplate = "chatml";

struct ChatMessage {
  // "system", "user", "assistant" or "tool" (a tool's result; an
  // assistant's calls are in its content, as tool_calls.h renders them).
  std::string role;
  std::string content;
};

class ChatTemplate {
 public:
  // The family of `jinja_template` (a GGUF's tokenizer.chat_template).
  // NOT_FOUND when it is empty (the model has no template) or when no family
  // matches; the message shows how the template starts and lists the names
  // FromName accepts.
  static absl::StatusOr<ChatTemplate> Detect(absl::string_view jinja_template);

  // The family called `name` (or an alias such as "mistral").
  // INVALID_ARGUMENT listing the known names when there is none.
  static absl::StatusOr<ChatTemplate> FromName(absl::string_view name);

  // What a model whose GGUF carries `jinja_template` chats with: Detect's
  // family, else kFallbackChatTemplate with a notice saying why (see
  // ModelChatTemplate). Never fails.
  static ModelChatTemplate ForModel(absl::string_view jinja_template);

  // The prompt for `messages`, ending with the opening of the assistant's
  // turn when `add_generation_prompt` (formats whose user turn already opens
  // it add nothing). INVALID_ARGUMENT naming the message for a role other
  // than system/user/assistant/tool, and for conversations the family's template
  // refuses (see TurnStyle: e.g. Gemma needs user/assistant to alternate).
  // Families without a system role fold a leading system message into a
  // user message, as their templates or llama.cpp do.
  absl::StatusOr<std::string> Apply(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  absl::string_view name() const;
  // True when Apply's output contains the BOS token text (see above).
  bool renders_bos() const;
  // How the family's models call tools (tool_calls.h).
  ToolFormat tool_format() const;

 private:
  explicit ChatTemplate(const ChatFamily* family) : family_(family) {}
  const ChatFamily* family_;  // into the static table; never null
};

struct ModelChatTemplate {
  ChatTemplate chat_template;
  // Empty when the model's own template was recognised. Otherwise one line
  // for octod's log: why the model has no family (Detect's reason, with an
  // excerpt of the template), that it chats in chatml, and the names a
  // request may give instead.
  std::string fallback_notice;
};

// Every name FromName accepts: the families in detection order, then aliases.
std::vector<std::string> KnownChatTemplateNames();

}  // namespace octo
