// octo-gen --chat's input: """ blocks are one turn, slash commands are
// recognised, and piped text passes through unchanged.
#include "client/chat_input.h"

#include <sstream>

#include "gtest/gtest.h"

namespace octo {
namespace {

TEST(ChatInputTest, ALineIsATurnAndAQuotedBlockIsOne) {
  std::istringstream in("hello  \n\"\"\"first line\nsecond line\n\"\"\"\n\"\"\"one line\"\"\"\nlast\n\"\"\"unfinished\n");
  int continuations = 0;
  auto more = [&] { ++continuations; };
  EXPECT_EQ(ReadTurn(in, more), "hello");
  EXPECT_EQ(ReadTurn(in, more), "first line\nsecond line");
  EXPECT_EQ(continuations, 2);
  EXPECT_EQ(ReadTurn(in, more), "one line");
  EXPECT_EQ(ReadTurn(in, more), "last");
  EXPECT_EQ(ReadTurn(in, more), "unfinished") << "a block the input ends inside";
  EXPECT_EQ(ReadTurn(in, more), std::nullopt);
}

TEST(ChatInputTest, SlashCommandsAreRecognised) {
  EXPECT_EQ(ParseChatInput("/bye", true).kind, ChatInput::Kind::kBye);
  EXPECT_EQ(ParseChatInput(" /exit ", true).kind, ChatInput::Kind::kBye);
  EXPECT_EQ(ParseChatInput("/clear", true).kind, ChatInput::Kind::kClear);
  EXPECT_EQ(ParseChatInput("/?", true).kind, ChatInput::Kind::kHelp);
  const ChatInput set = ParseChatInput("/set system You are  brief.", true);
  EXPECT_EQ(set.kind, ChatInput::Kind::kSet);
  EXPECT_EQ(set.key, "system");
  EXPECT_EQ(set.value, "You are  brief.");
  EXPECT_EQ(ParseChatInput("/set temperature 0.2", true).value, "0.2");
  EXPECT_EQ(ParseChatInput("/sett x", true).kind, ChatInput::Kind::kUnknown);
  EXPECT_EQ(ParseChatInput("hello /bye", true).kind, ChatInput::Kind::kMessage);
}

TEST(ChatInputTest, OnAPipeUnknownSlashLinesAreMessages) {
  const ChatInput path = ParseChatInput("/usr/bin is a folder", false);
  EXPECT_EQ(path.kind, ChatInput::Kind::kMessage);
  EXPECT_EQ(path.text, "/usr/bin is a folder");
  EXPECT_EQ(ParseChatInput("/bye", false).kind, ChatInput::Kind::kBye);
  EXPECT_EQ(ParseChatInput("/clear\nmore", true).kind, ChatInput::Kind::kMessage) << "a block is a message";
}

}  // namespace
}  // namespace octo
