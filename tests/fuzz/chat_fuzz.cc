// libFuzzer target for chat rendering: hostile messages through every chat
// family, and hostile template text through detection.
//
// The input, split at NUL bytes: the first field picks the family (its
// first byte indexes KnownChatTemplateNames(); the whole field also goes to
// ChatTemplate::Detect as a Jinja template), then role and content fields
// in turn. Roles are any bytes, not only system/user/assistant. Invariants
// (chat_template.h): Apply either renders or refuses with a message; a
// rendering holds every message's content (trimmed); the rendered prompt tokenizes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "daemon/chat/chat_template.h"
#include "tests/fuzz/fuzz_vocab.h"

namespace {

void Check(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "chat_fuzz: invariant broken: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const std::vector<absl::string_view> fields = absl::StrSplit(input, '\0');
  const absl::string_view selector = fields[0];
  (void)octo::ChatTemplate::Detect(selector);

  static const std::vector<std::string> names = octo::KnownChatTemplateNames();
  const std::string& name = names[selector.empty() ? 0 : static_cast<uint8_t>(selector[0]) % names.size()];
  absl::StatusOr<octo::ChatTemplate> chat = octo::ChatTemplate::FromName(name);
  Check(chat.ok(), "every known name loads");
  Check(!octo::ChatTemplate::FromName(selector).ok() || !selector.empty(), "an empty name is refused");

  std::vector<octo::ChatMessage> messages;
  for (size_t i = 1; i + 1 < fields.size(); i += 2) messages.push_back({std::string(fields[i]), std::string(fields[i + 1])});
  for (const bool generation_prompt : {true, false}) {
    absl::StatusOr<std::string> prompt = chat->Apply(messages, generation_prompt);
    if (!prompt.ok()) {
      Check(!prompt.status().message().empty(), "a refusal says why");
      continue;
    }
    for (const octo::ChatMessage& message : messages) {
      // Some families trim the content, as their templates do.
      Check(absl::StrContains(*prompt, absl::StripAsciiWhitespace(message.content)),
            "the rendering holds every message");
    }
    const octo::Tokenizer& tokenizer = octo::fuzzing::FuzzTokenizers()[size % 3];
    for (int32_t id : tokenizer.Encode(*prompt, !chat->renders_bos(), /*parse_special=*/true)) {
      Check(id >= 0 && id < tokenizer.vocab_size(), "the prompt's ids are in the vocabulary");
    }
  }
  return 0;
}
