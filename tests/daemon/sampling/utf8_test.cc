#include "storage/utf8.h"

#include "gtest/gtest.h"

namespace octo {
namespace {

TEST(Utf8Test, Validity) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80"));  // é → 😀
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("\x80"));                 // lone continuation
  EXPECT_FALSE(IsValidUtf8("\xc3"));                 // truncated
  EXPECT_FALSE(IsValidUtf8("\xc3("));                // lead without continuation
  EXPECT_FALSE(IsValidUtf8("\xc0\x80"));             // overlong NUL
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\xaf"));         // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));         // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));     // above U+10FFFF
}

TEST(Utf8Test, IncompleteTail) {
  EXPECT_EQ(IncompleteUtf8Tail(""), 0u);
  EXPECT_EQ(IncompleteUtf8Tail("abc"), 0u);
  EXPECT_EQ(IncompleteUtf8Tail("caf\xc3\xa9"), 0u);
  EXPECT_EQ(IncompleteUtf8Tail("caf\xc3"), 1u);
  EXPECT_EQ(IncompleteUtf8Tail("x\xf0\x9f\x98"), 3u);
  EXPECT_EQ(IncompleteUtf8Tail("x\xe2\x86"), 2u);
  EXPECT_EQ(IncompleteUtf8Tail("x\x80\x80"), 0u);  // stray continuation bytes: nothing to wait for
}

TEST(Utf8Test, CutBeforeMovesOffContinuationBytes) {
  const absl::string_view text = "a\xe2\x86\x92z";  // a → z: bytes 0, 1-3, 4
  EXPECT_EQ(Utf8CutBefore(text, 0), 0u);
  EXPECT_EQ(Utf8CutBefore(text, 1), 1u);
  EXPECT_EQ(Utf8CutBefore(text, 2), 1u);
  EXPECT_EQ(Utf8CutBefore(text, 3), 1u);
  EXPECT_EQ(Utf8CutBefore(text, 4), 4u);
  EXPECT_EQ(Utf8CutBefore(text, 5), 5u);
  EXPECT_EQ(Utf8CutBefore("a\x80\x80", 2), 2u);  // stray bytes belong to no character
}

}  // namespace
}  // namespace octo
