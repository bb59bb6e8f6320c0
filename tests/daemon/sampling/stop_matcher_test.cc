#include "daemon/sampling/stop_matcher.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "storage/utf8.h"

namespace octo {
namespace {

struct Streamed {
  std::vector<std::string> outputs;  // what each Feed returned
  std::string text;                  // everything returned, Flush included
  bool stopped = false;
};

Streamed FeedAll(StopMatcher& matcher, const std::vector<std::string>& pieces) {
  Streamed run;
  for (const std::string& piece : pieces) {
    StopMatcher::Output out = matcher.Feed(piece);
    run.outputs.push_back(out.text);
    run.text += out.text;
    if (out.stopped) {
      run.stopped = true;
      break;
    }
  }
  run.text += matcher.Flush();
  return run;
}

TEST(StopMatcherTest, NoStopsPassesTextThrough) {
  StopMatcher matcher({});
  const Streamed run = FeedAll(matcher, {"Hello", ", ", "world"});
  EXPECT_EQ(run.outputs, (std::vector<std::string>{"Hello", ", ", "world"}));
  EXPECT_FALSE(run.stopped);
}

TEST(StopMatcherTest, StopInsideOnePieceCutsAtItsStart) {
  StopMatcher matcher({"\nUser:"});
  const Streamed run = FeedAll(matcher, {"Hi there\nUser: more"});
  EXPECT_TRUE(run.stopped);
  EXPECT_EQ(run.text, "Hi there");
  EXPECT_EQ(matcher.matched_stop(), "\nUser:");
}

TEST(StopMatcherTest, StopAcrossPiecesIsHeldBackThenDropped) {
  StopMatcher matcher({"\nUser:"});
  const Streamed run = FeedAll(matcher, {"Hel", "lo\nUs", "er:", " ignored"});
  // "\nUs" could begin the stop, so it waits; then the stop completes.
  EXPECT_EQ(run.outputs, (std::vector<std::string>{"Hel", "lo", ""}));
  EXPECT_TRUE(run.stopped);
  EXPECT_EQ(run.text, "Hello");
}

TEST(StopMatcherTest, FalseStartIsReleasedWhenItCannotMatch) {
  StopMatcher matcher({"\nUser:"});
  const Streamed run = FeedAll(matcher, {"a\nUs", "ual"});
  EXPECT_EQ(run.outputs, (std::vector<std::string>{"a", "\nUsual"}));
  EXPECT_FALSE(run.stopped);
}

TEST(StopMatcherTest, HeldTextComesOutOnFlush) {
  StopMatcher matcher({"END"});
  const Streamed run = FeedAll(matcher, {"the E", "N"});
  EXPECT_EQ(run.outputs, (std::vector<std::string>{"the ", ""}));
  EXPECT_EQ(run.text, "the EN");
  EXPECT_FALSE(matcher.stopped());
}

TEST(StopMatcherTest, StopAtTheFirstPiece) {
  StopMatcher matcher({"###"});
  const Streamed run = FeedAll(matcher, {"###", "more"});
  EXPECT_TRUE(run.stopped);
  EXPECT_EQ(run.outputs, (std::vector<std::string>{""}));
  EXPECT_EQ(run.text, "");
}

TEST(StopMatcherTest, EarliestOfSeveralStopsWins) {
  StopMatcher matcher({"world", "lo w", "x"});
  const Streamed run = FeedAll(matcher, {"hel", "lo wor", "ld x"});
  EXPECT_TRUE(run.stopped);
  EXPECT_EQ(run.text, "hel");
  EXPECT_EQ(matcher.matched_stop(), "lo w");
}

TEST(StopMatcherTest, OverlappingPrefixOfItself) {
  // "aaab": the stop "aab" begins at the second 'a'.
  StopMatcher matcher({"aab"});
  const Streamed run = FeedAll(matcher, {"a", "a", "a", "b"});
  EXPECT_EQ(run.outputs, (std::vector<std::string>{"", "", "a", ""}));
  EXPECT_EQ(run.text, "a");
}

TEST(StopMatcherTest, FeedingAfterTheStopGivesNothing) {
  StopMatcher matcher({"!"});
  EXPECT_TRUE(matcher.Feed("hi!").stopped);
  const StopMatcher::Output out = matcher.Feed("more");
  EXPECT_TRUE(out.stopped);
  EXPECT_EQ(out.text, "");
  EXPECT_EQ(matcher.Flush(), "");
}

TEST(StopMatcherTest, UnicodeStopFedByteByByte) {
  const std::string text = "caf\xc3\xa9 \xe2\x86\x92 d\xc3\xa9j\xc3\xa0 \xe2\x86\x92" "end tail";  // café → déjà →end tail
  StopMatcher matcher({"\xe2\x86\x92" "end"});  // "→end"
  std::vector<std::string> bytes;
  for (char c : text) bytes.push_back(std::string(1, c));
  const Streamed run = FeedAll(matcher, bytes);
  EXPECT_TRUE(run.stopped);
  EXPECT_EQ(run.text, "caf\xc3\xa9 \xe2\x86\x92 d\xc3\xa9j\xc3\xa0 ");
  for (const std::string& out : run.outputs) EXPECT_TRUE(IsValidUtf8(out)) << "split character in: " << out;
}

TEST(StopMatcherTest, PieceEndingMidCharacterIsHeldWithoutStops) {
  StopMatcher matcher({});
  const Streamed run = FeedAll(matcher, {"h\xc3", "\xa9llo \xf0\x9f", "\x98\x80!"});  // "héllo 😀!"
  EXPECT_EQ(run.outputs, (std::vector<std::string>{"h", "\xc3\xa9llo ", "\xf0\x9f\x98\x80!"}));
}

TEST(StopMatcherTest, EmptyStopStringsAreIgnored) {
  StopMatcher matcher({"", "zz"});
  const Streamed run = FeedAll(matcher, {"abc"});
  EXPECT_FALSE(run.stopped);
  EXPECT_EQ(run.outputs, (std::vector<std::string>{"abc"}));
}

}  // namespace
}  // namespace octo
