#include "client/chat_input.h"

#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace octo {

std::optional<std::string> ReadTurn(std::istream& in, const std::function<void()>& more) {
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  absl::string_view first = absl::StripTrailingAsciiWhitespace(line);
  if (!absl::StartsWith(absl::StripLeadingAsciiWhitespace(first), "\"\"\"")) return std::string(first);
  // A """ block: from after the opening mark to before the closing one.
  std::string turn(absl::StripLeadingAsciiWhitespace(first).substr(3));
  if (absl::EndsWith(turn, "\"\"\"")) return turn.substr(0, turn.size() - 3);  // """one line"""
  while (true) {
    if (more) more();
    if (!std::getline(in, line)) return turn;
    absl::string_view next = absl::StripTrailingAsciiWhitespace(line);
    const bool last = absl::EndsWith(next, "\"\"\"");
    if (last) next.remove_suffix(3);
    if (!last || !next.empty()) {
      if (!turn.empty()) turn += "\n";
      turn.append(next.data(), next.size());
    }
    if (last) return turn;
  }
}

ChatInput ParseChatInput(const std::string& turn, bool interactive) {
  ChatInput input;
  input.text = turn;
  const absl::string_view text = absl::StripAsciiWhitespace(turn);
  if (!absl::StartsWith(text, "/") || absl::StrContains(text, "\n")) return input;
  if (text == "/bye" || text == "/exit") {
    input.kind = ChatInput::Kind::kBye;
  } else if (text == "/clear") {
    input.kind = ChatInput::Kind::kClear;
  } else if (text == "/help" || text == "/?") {
    input.kind = ChatInput::Kind::kHelp;
  } else if (absl::StartsWith(text, "/set ")) {
    absl::string_view rest = absl::StripLeadingAsciiWhitespace(text.substr(5));
    const size_t space = rest.find(' ');
    input.kind = ChatInput::Kind::kSet;
    input.key = std::string(rest.substr(0, space));
    input.value = space == absl::string_view::npos ? "" : std::string(absl::StripAsciiWhitespace(rest.substr(space)));
  } else if (interactive) {
    input.kind = ChatInput::Kind::kUnknown;
  }
  return input;
}

const char* ChatCommandsHelp() {
  return "  /bye                 end the conversation (/exit too; Ctrl-D)\n"
         "  /clear               forget the conversation so far\n"
         "  /set temperature T   sampling temperature for the next turns\n"
         "  /set system TEXT     the system message, sent with the next turn\n"
         "  \"\"\"                  begin and end a message of several lines\n"
         "  Ctrl-C               stop the reply (a second Ctrl-C at the prompt exits)\n";
}

}  // namespace octo
