// The hand-written pre-tokenizers against expectations worked out from the
// regexes they implement (pretokenizer.h), and the Unicode classes and UTF-8
// decoding under them. No Llama-3 or Qwen2 vocabulary is available, so these
// splits are the check on those pre-tokenizers.
#include <string>
#include <vector>

#include "daemon/tokenizer/pretokenizer.h"
#include "daemon/tokenizer/unicode.h"
#include "gtest/gtest.h"

namespace octo::tokenizer {
namespace {

using Words = std::vector<std::string>;

Words Split(absl::string_view pre_name, absl::string_view text) {
  absl::StatusOr<PreTokenizer> pre = FindPreTokenizer(pre_name);
  EXPECT_TRUE(pre.ok()) << pre.status();
  return pre.ok() ? PreTokenize(*pre, text) : Words{};
}

TEST(UnicodeTest, Classes) {
  EXPECT_EQ(UnicodeClassesOf('A'), kLetter);
  EXPECT_EQ(UnicodeClassesOf(0x00E9), kLetter);   // é
  EXPECT_EQ(UnicodeClassesOf(0x4E2D), kLetter);   // 中
  EXPECT_EQ(UnicodeClassesOf('7'), kNumber);
  EXPECT_EQ(UnicodeClassesOf(0x0663), kNumber);   // ٣ ARABIC-INDIC DIGIT THREE
  EXPECT_EQ(UnicodeClassesOf(0x00BD), kNumber);   // ½ (No)
  EXPECT_EQ(UnicodeClassesOf(' '), kWhitespace | kSeparator);
  EXPECT_EQ(UnicodeClassesOf('\n'), kWhitespace | kOther);
  EXPECT_EQ(UnicodeClassesOf(0x00A0), kWhitespace | kSeparator);  // no-break space
  EXPECT_EQ(UnicodeClassesOf(0x3000), kWhitespace | kSeparator);  // ideographic space
  EXPECT_EQ(UnicodeClassesOf(0x200B), kOther);    // zero width space: Cf, not \s
  EXPECT_EQ(UnicodeClassesOf(','), kPunctuation);
  EXPECT_EQ(UnicodeClassesOf('$'), kSymbol);
  EXPECT_EQ(UnicodeClassesOf(0x20AC), kSymbol);   // €
  EXPECT_EQ(UnicodeClassesOf(0x1F999), kSymbol);  // 🦙
  EXPECT_EQ(UnicodeClassesOf(0x0301), kMark);     // combining acute
  EXPECT_EQ(UnicodeClassesOf(0xE000), kOther);    // private use
  EXPECT_EQ(UnicodeClassesOf(0x0378), 0);         // unassigned
  EXPECT_EQ(UnicodeClassesOf(0x10FFFF), 0);
  EXPECT_EQ(UnicodeClassesOf(0x110000), 0);
}

TEST(UnicodeTest, DecodeCostsOneBytePerError) {
  auto decode = [](absl::string_view s) { return DecodeUtf8All(s); };
  EXPECT_EQ(decode("a\xE2\x82\xAC"), (std::vector<uint32_t>{'a', 0x20AC}));
  EXPECT_EQ(decode("\xF0\x9F\xA6\x99"), (std::vector<uint32_t>{0x1F999}));
  EXPECT_EQ(decode("\xE2\x82" "a"), (std::vector<uint32_t>{0xFFFD, 0xFFFD, 'a'}));  // truncated
  EXPECT_EQ(decode("\x80"), (std::vector<uint32_t>{0xFFFD}));                     // stray continuation
  EXPECT_EQ(decode("\xC0\xAF"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));         // overlong '/'
  EXPECT_EQ(decode("\xED\xA0\x80"), (std::vector<uint32_t>{0xFFFD, 0xFFFD, 0xFFFD}));  // surrogate
  EXPECT_EQ(decode("\xF4\x90\x80\x80"), (std::vector<uint32_t>(4, 0xFFFD)));      // above U+10FFFF
  std::string encoded;
  for (uint32_t cp : {0x24u, 0xA2u, 0x20ACu, 0x10348u}) AppendUtf8(cp, &encoded);
  EXPECT_EQ(encoded, "$\xC2\xA2\xE2\x82\xAC\xF0\x90\x8D\x88");
}

TEST(PreTokenizerTest, UnknownNameIsAnError) {
  absl::StatusOr<PreTokenizer> pre = FindPreTokenizer("klingon");
  ASSERT_FALSE(pre.ok());
  EXPECT_EQ(pre.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(pre.status().message().find("tokenizer.ggml.pre"), absl::string_view::npos);
  EXPECT_NE(pre.status().message().find("klingon"), absl::string_view::npos);
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
TEST(PreTokenizerTest, Gpt2) {
  EXPECT_EQ(Split("gpt-2", "Hello world"), (Words{"Hello", " world"}));
  // Contractions are case-sensitive: "'M" is punctuation then a letter.
  EXPECT_EQ(Split("gpt-2", "I'M don't"), (Words{"I", "'", "M", " don", "'t"}));
  EXPECT_EQ(Split("gpt-2", "we're y'all"), (Words{"we", "'re", " y", "'", "all"}));
  EXPECT_EQ(Split("gpt-2", "12345 67"), (Words{"12345", " 67"}));
  // A run of spaces leaves its last one to the next word.
  EXPECT_EQ(Split("gpt-2", "   Hello"), (Words{"  ", " Hello"}));
  EXPECT_EQ(Split("gpt-2", "a\n\nb"), (Words{"a", "\n", "\n", "b"}));
  EXPECT_EQ(Split("gpt-2", "end   "), (Words{"end", "   "}));
  EXPECT_EQ(Split("gpt-2", "x!!! y?"), (Words{"x", "!!!", " y", "?"}));
  EXPECT_EQ(Split("gpt-2", "\xE2\x82\xAC" "100"), (Words{"\xE2\x82\xAC", "100"}));                 // €100
  EXPECT_EQ(Split("gpt-2", "na\xC3\xAFve caf\xC3\xA9"), (Words{"na\xC3\xAFve", " caf\xC3\xA9"}));  // naïve café
  EXPECT_EQ(Split("gpt-2", "cafe\xCC\x81!"), (Words{"cafe", "\xCC\x81!"}));  // a combining mark is no letter
  EXPECT_EQ(Split("gpt-2", "\xF0\x9F\xA6\x99 ok"), (Words{"\xF0\x9F\xA6\x99", " ok"}));           // 🦙 ok
  EXPECT_EQ(Split("gpt-2", "\xD9\xA3\xD9\xA4x"), (Words{"\xD9\xA3\xD9\xA4", "x"}));               // ٣٤x
  EXPECT_EQ(Split("gpt-2", ""), (Words{}));
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
TEST(PreTokenizerTest, Llama3) {
  EXPECT_EQ(Split("llama-bpe", "Hello world"), (Words{"Hello", " world"}));
  // Contractions ignore case.
  EXPECT_EQ(Split("llama-bpe", "I'M don't WE'LL"), (Words{"I", "'M", " don", "'t", " WE", "'LL"}));
  // Numbers in groups of at most three digits, never with a space.
  EXPECT_EQ(Split("llama-bpe", "12345"), (Words{"123", "45"}));
  EXPECT_EQ(Split("llama-bpe", "x 1234567"), (Words{"x", " ", "123", "456", "7"}));
  EXPECT_EQ(Split("llama-bpe", "ab12cd"), (Words{"ab", "12", "cd"}));
  // A letter run takes one leading non-letter, non-digit, non-newline; a
  // space before it is left alone, and punctuation runs keep one space.
  EXPECT_EQ(Split("llama-bpe", "'hello \tfoo (bar"), (Words{"'hello", " ", "\tfoo", " (", "bar"}));
  EXPECT_EQ(Split("llama-bpe", "$9.99"), (Words{"$", "9", ".", "99"}));
  // Punctuation takes one leading space and the newlines after it.
  EXPECT_EQ(Split("llama-bpe", "x ...\n\ny"), (Words{"x", " ...\n\n", "y"}));
  // Whitespace through its last newline; a space run leaves one space.
  EXPECT_EQ(Split("llama-bpe", "hello\n\nworld"), (Words{"hello", "\n\n", "world"}));
  EXPECT_EQ(Split("llama-bpe", "a  \n b"), (Words{"a", "  \n", " b"}));
  EXPECT_EQ(Split("llama-bpe", "\r\nfoo"), (Words{"\r\n", "foo"}));
  EXPECT_EQ(Split("llama-bpe", "   x"), (Words{"  ", " x"}));
  EXPECT_EQ(Split("llama-bpe", "x   "), (Words{"x", "   "}));
  EXPECT_EQ(Split("llama-bpe", " 12"), (Words{" ", "12"}));
  // Unicode letters and numbers; emoji are symbols.
  EXPECT_EQ(Split("llama-bpe", "\xC3\x9C" "ber\xD9\xA3\xD9\xA4\xD9\xA5\xD9\xA6"),  // Über٣٤٥٦
            (Words{"\xC3\x9C" "ber", "\xD9\xA3\xD9\xA4\xD9\xA5", "\xD9\xA6"}));
  EXPECT_EQ(Split("llama-bpe", "\xF0\x9F\xA6\x99\xF0\x9F\xA6\x99 hi"),  // 🦙🦙 hi
            (Words{"\xF0\x9F\xA6\x99\xF0\x9F\xA6\x99", " hi"}));
  EXPECT_EQ(Split("llama-bpe", "\xE4\xB8\xAD\xE6\x96\x87 ok"), (Words{"\xE4\xB8\xAD\xE6\x96\x87", " ok"}));  // 中文
  // Ill-formed bytes are U+FFFD, a symbol.
  EXPECT_EQ(Split("llama-bpe", "a\xFF" "b"), (Words{"a", "\xEF\xBF\xBD" "b"}));
  // The whole llama-3 family shares the splitter.
  for (absl::string_view name : {"llama3", "llama-v3", "dbrx", "smaug-bpe"}) {
    EXPECT_EQ(Split(name, "I'M 12345"), (Words{"I", "'M", " ", "123", "45"})) << name;
  }
}

// Llama-3's regex with \p{N} in place of \p{N}{1,3}.
TEST(PreTokenizerTest, Qwen2) {
  EXPECT_EQ(Split("qwen2", "12345"), (Words{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(Split("qwen2", "I'M don't 2024!"), (Words{"I", "'M", " don", "'t", " ", "2", "0", "2", "4", "!"}));
  EXPECT_EQ(Split("qwen2", "<|im_start|>user\nhi"), (Words{"<|", "im", "_start", "|>", "user", "\n", "hi"}));
  EXPECT_EQ(Split("qwen2", "\xD9\xA3\xD9\xA4"), (Words{"\xD9\xA3", "\xD9\xA4"}));
}

// llama.cpp's "default" list: [\p{P}\$\+<=>\^~\|]+ then GPT-2's regex, then
// \p{N}+, then [0-9][0-9][0-9].
TEST(PreTokenizerTest, Default) {
  EXPECT_EQ(Split("default", "Hello, world! 123456"),
            (Words{"Hello", ",", " world", "!", " ", "123", "456"}));
  EXPECT_EQ(Split("default", "a+b=c"), (Words{"a", "+", "b", "=", "c"}));
  EXPECT_EQ(Split("default", "12345x"), (Words{"123", "45", "x"}));
  EXPECT_EQ(Split("", "12345x"), Split("default", "12345x"));  // a missing key means "default"
}

// \p{N} first, then GPT-2's regex: one digit per word.
TEST(PreTokenizerTest, Smollm) {
  EXPECT_EQ(Split("smollm", "abc123 4"), (Words{"abc", "1", "2", "3", " ", "4"}));
  EXPECT_EQ(Split("starcoder", "x=10"), (Words{"x", "=", "1", "0"}));
}

TEST(PreTokenizerTest, StepsTileTheirInput) {
  const std::vector<uint32_t> cpts = DecodeUtf8All("Hello, world! 12345 \xF0\x9F\xA6\x99\n\n  x");
  const std::vector<size_t> whole = {cpts.size()};
  for (SplitStep step : {SplitStep::kGpt2, SplitStep::kLlama3, SplitStep::kQwen2, SplitStep::kEachNumber,
                         SplitStep::kNumberRuns, SplitStep::kPunctuationRuns,
                         SplitStep::kPunctuationRunsWithBacktick, SplitStep::kAsciiDigitTriples}) {
    const std::vector<size_t> pieces = ApplySplitStep(step, cpts, whole);
    size_t sum = 0;
    for (size_t n : pieces) {
      EXPECT_GT(n, 0u);
      sum += n;
    }
    EXPECT_EQ(sum, cpts.size()) << static_cast<int>(step);
  }
}

}  // namespace
}  // namespace octo::tokenizer
