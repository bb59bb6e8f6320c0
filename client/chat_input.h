// octo-gen --chat's input, as `ollama run` reads it: one line is one turn,
// the lines between two """ marks are one turn (a pasted paragraph), and a
// few slash commands steer the conversation:
//   /bye (or /exit)            end the conversation
//   /clear                     forget the conversation so far (a fresh session)
//   /set temperature 0.2       sampling for the next turns
//   /set system You are ...    the system message, sent with the next turn
//   /help (or /?)              list these
#pragma once

#include <functional>
#include <istream>
#include <optional>
#include <string>

namespace octo {

struct ChatInput {
  enum class Kind { kMessage, kBye, kClear, kSet, kHelp, kUnknown };
  Kind kind = Kind::kMessage;
  std::string text;        // kMessage: the turn; kUnknown: the command as typed
  std::string key, value;  // kSet
};

// The next turn, without its line end; nullopt at the end of input.
// `more` is called before each line of a """ block after the first (a
// terminal shows a continuation prompt there). A block the input ends inside
// is the turn as far as it went.
std::optional<std::string> ReadTurn(std::istream& in, const std::function<void()>& more = {});

// What `turn` asks for. Slash lines that are not commands are messages on a
// pipe (`interactive` false), so piped text passes through unchanged, and
// kUnknown on a terminal.
ChatInput ParseChatInput(const std::string& turn, bool interactive);

// The /help text.
const char* ChatCommandsHelp();

}  // namespace octo
