// The streaming detokenizer: characters split over tokens come out whole,
// bad bytes come out as U+FFFD without stalling the stream, and the stream
// adds up to the full detokenization.
#include <random>
#include <string>
#include <vector>

#include "daemon/tokenizer/streaming_detokenizer.h"
#include "daemon/tokenizer/tokenizer.h"
#include "daemon/tokenizer/unicode.h"
#include "gtest/gtest.h"
#include "tests/daemon/tokenizer/tokenizer_test_util.h"
#include "tests/shared_data.h"

namespace octo {
namespace {

using ::octo::testing::Escaped;
using ::octo::testing::SpmMetadata;
using ::octo::testing::SpmVocabSpec;

constexpr char kReplacement[] = "\xEF\xBF\xBD";
constexpr int32_t kFirstPiece = 3 + 256;

int32_t ByteToken(unsigned char byte) { return 3 + byte; }

Tokenizer SmallSpm() {
  SpmVocabSpec spec;
  spec.pieces = {"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "\xE2\x82\xAC"};  // ▁ a b ▁a €
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::FromMetadata(SpmMetadata(spec));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return *std::move(tokenizer);
}

// What the stream must add up to: Decode with each ill-formed byte as U+FFFD.
std::string Sanitized(const std::string& bytes) {
  std::string out;
  for (uint32_t cp : tokenizer::DecodeUtf8All(bytes)) tokenizer::AppendUtf8(cp, &out);
  return out;
}

TEST(StreamingDetokenizerTest, CharacterSplitOverByteTokensComesOutWhole) {
  StreamingDetokenizer stream(SmallSpm());
  EXPECT_EQ(stream.Push(kFirstPiece + 3), " a");
  // 🦙 is F0 9F A6 99.
  EXPECT_EQ(stream.Push(ByteToken(0xF0)), "");
  EXPECT_EQ(stream.Push(ByteToken(0x9F)), "");
  EXPECT_EQ(stream.Push(ByteToken(0xA6)), "");
  EXPECT_EQ(stream.pending_bytes(), 3u);
  EXPECT_EQ(stream.Push(ByteToken(0x99)), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(stream.pending_bytes(), 0u);
  EXPECT_EQ(stream.Push(kFirstPiece + 4), "\xE2\x82\xAC");  // a whole character in one piece
  EXPECT_EQ(stream.Flush(), "");
}

TEST(StreamingDetokenizerTest, BadBytesDoNotStall) {
  StreamingDetokenizer stream(SmallSpm());
  // A byte that never starts a character comes out at once.
  EXPECT_EQ(stream.Push(ByteToken(0xFF)), kReplacement);
  // A lead byte waits; what follows shows it was cut short.
  EXPECT_EQ(stream.Push(ByteToken(0xE2)), "");
  EXPECT_EQ(stream.Push(kFirstPiece + 1), std::string(kReplacement) + "a");
  // A lead byte whose second byte cannot follow it: both go out.
  EXPECT_EQ(stream.Push(ByteToken(0xE0)), "");
  EXPECT_EQ(stream.Push(ByteToken(0x80)), std::string(kReplacement) + kReplacement);
  // The stream ends inside a character.
  EXPECT_EQ(stream.Push(ByteToken(0xF0)), "");
  EXPECT_EQ(stream.Push(ByteToken(0x9F)), "");
  EXPECT_EQ(stream.Flush(), std::string(kReplacement) + kReplacement);
  EXPECT_EQ(stream.pending_bytes(), 0u);
  // Flush started a new stream.
  EXPECT_EQ(stream.Push(kFirstPiece + 2), "b");
}

TEST(StreamingDetokenizerTest, SpecialTokensFollowRenderSpecial) {
  EXPECT_EQ(StreamingDetokenizer(SmallSpm()).Push(2), "");
  EXPECT_EQ(StreamingDetokenizer(SmallSpm(), /*render_special=*/true).Push(2), "</s>");
  EXPECT_EQ(StreamingDetokenizer(SmallSpm()).Push(999999), "");
}

TEST(StreamingDetokenizerTest, StreamAddsUpToTheFullDetokenization) {
  const Tokenizer tokenizer = SmallSpm();
  std::mt19937 rng(7);
  // Mostly byte tokens from the UTF-8 lead and continuation ranges, so that
  // characters are often split, cut short, or ill-formed.
  std::uniform_int_distribution<int> pick(0, 9);
  std::uniform_int_distribution<int> high_byte(0x80, 0xFF);
  std::uniform_int_distribution<int> piece(kFirstPiece, kFirstPiece + 4);
  for (int round = 0; round < 2000; ++round) {
    std::vector<int32_t> ids(1 + round % 12);
    for (int32_t& id : ids) id = pick(rng) < 7 ? ByteToken(high_byte(rng)) : piece(rng);
    StreamingDetokenizer stream(tokenizer);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.Push(id);
    streamed += stream.Flush();
    const std::string full = tokenizer.Decode(ids, false);
    ASSERT_EQ(streamed, Sanitized(full)) << Escaped(full);
    ASSERT_EQ(Sanitized(streamed), streamed);  // valid UTF-8
  }
}

TEST(StreamingDetokenizerTest, BpeTokensThatSplitACharacter) {
  OCTO_REQUIRE_SHARED("models/vocab/ggml-vocab-gpt-2.gguf");
  const Tokenizer& tokenizer = testing::SharedTokenizer("vocab/ggml-vocab-gpt-2.gguf");
  const std::string text = "llamas \xF0\x9F\xA6\x99 and \xE4\xB8\xAD\xE6\x96\x87 text";  // 🦙, 中文
  const std::vector<int32_t> ids = tokenizer.Encode(text, false, false);
  StreamingDetokenizer stream(tokenizer);
  std::string streamed;
  int held = 0;
  for (int32_t id : ids) {
    const std::string piece = tokenizer.Piece(id, false);
    const std::string out = stream.Push(id);
    held += out != piece;  // the stream held back part of a character
    ASSERT_EQ(Sanitized(out), out);
    streamed += out;
  }
  EXPECT_GT(held, 0);  // GPT-2 splits these characters over several tokens
  EXPECT_EQ(streamed + stream.Flush(), text);
}

}  // namespace
}  // namespace octo
