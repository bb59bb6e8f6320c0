// A reply split into thought, content and tool calls: streamed piece by
// piece (here, byte by byte and in one piece) it reports what the whole
// reply does, nothing of a tag leaks into content, and text that only
// looked like a call is given back as content.
#include "daemon/chat/reply_splitter.h"

#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace octo {
namespace {

struct Split {
  std::string reasoning, content;
  size_t calls = 0;
};

Split Streamed(bool thinks, std::optional<ToolFormat> tools, const std::string& text, size_t piece) {
  ReplySplitter splitter(thinks, tools);
  Split out;
  for (size_t i = 0; i < text.size(); i += piece) {
    const ReplySplitter::Delta delta = splitter.Add(text.substr(i, piece));
    out.reasoning += delta.reasoning;
    out.content += delta.content;
  }
  const ReplySplitter::Final final = splitter.Finish();
  out.reasoning += final.rest.reasoning;
  out.content += final.rest.content;
  out.calls = final.calls.size();
  return out;
}

void ExpectSplit(bool thinks, std::optional<ToolFormat> tools, const std::string& text, const std::string& reasoning,
                 const std::string& content, size_t calls) {
  const ReplySplitter::Whole whole = ReplySplitter::Split(thinks, tools, text);
  EXPECT_EQ(whole.reasoning, reasoning) << text;
  EXPECT_EQ(whole.content, content) << text;
  EXPECT_EQ(whole.calls.size(), calls) << text;
  for (const size_t piece : {1, 3, 7}) {
    const Split streamed = Streamed(thinks, tools, text, piece);
    EXPECT_EQ(streamed.reasoning, reasoning) << text << " in pieces of " << piece;
    EXPECT_EQ(streamed.content, content) << text << " in pieces of " << piece;
    EXPECT_EQ(streamed.calls, calls) << text << " in pieces of " << piece;
  }
}

TEST(ReplySplitter, AThoughtGoesApartFromTheAnswer) {
  ExpectSplit(true, std::nullopt, "<think>\nIt is 4.\n</think>\n\nFour.", "\nIt is 4.\n", "Four.", 0);
  ExpectSplit(true, std::nullopt, "\n<think>a < b </thin </think>ok", "a < b </thin ", "ok", 0);
  ExpectSplit(true, std::nullopt, "No thought here.", "", "No thought here.", 0);
  ExpectSplit(true, std::nullopt, "<thinking aloud>", "", "<thinking aloud>", 0);
  ExpectSplit(true, std::nullopt, "<think>cut short by max_tokens", "cut short by max_tokens", "", 0);
  // A model that does not think: tags are its text.
  ExpectSplit(false, std::nullopt, "<think>x</think>y", "", "<think>x</think>y", 0);
}

TEST(ReplySplitter, ToolCallsComeOutOfTheContent) {
  const std::string call = "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>";
  ExpectSplit(false, ToolFormat::kHermes, call, "", "", 1);
  ExpectSplit(false, ToolFormat::kHermes, "Checking.\n" + call, "", "Checking.\n", 1);
  ExpectSplit(true, ToolFormat::kHermes, "<think>need ping</think>\n" + call + "\n" + call, "need ping", "", 2);
  ExpectSplit(false, ToolFormat::kHermes, "a <tool_call> that is not JSON", "", "a <tool_call> that is not JSON", 0);
  ExpectSplit(false, ToolFormat::kLlama3, " {\"name\": \"ping\", \"parameters\": {}}", "", "", 1);
  ExpectSplit(false, ToolFormat::kLlama3, "{\"not\": \"a call\"}", "", "{\"not\": \"a call\"}", 0);
  ExpectSplit(false, ToolFormat::kGenericJson, "Hello there.", "", "Hello there.", 0);
}

}  // namespace
}  // namespace octo
