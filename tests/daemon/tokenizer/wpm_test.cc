// WordPiece ("bert") on hand-made vocabularies: how text is cut into words
// (NFD base, lowercase, punctuation, CJK), the greedy longest match, unknown
// words, special tokens, pieces, and the metadata a bert vocabulary needs.
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "daemon/tokenizer/tokenizer.h"
#include "daemon/tokenizer/unicode.h"
#include "daemon/tokenizer/wpm.h"
#include "gtest/gtest.h"
#include "tests/daemon/tokenizer/tokenizer_test_util.h"

namespace octo {
namespace {

using ::octo::testing::I32;
using ::octo::testing::kWpmFirstPiece;
using ::octo::testing::MakeTokenizer;
using ::octo::testing::Remove;
using ::octo::testing::Set;
using ::octo::testing::StringArrayValue;
using ::octo::testing::WpmMetadata;
using ::octo::testing::WpmVocabSpec;
using Ids = std::vector<int32_t>;
using Words = std::vector<std::string>;

#define W "\xE2\x96\x81"  // "▁", the word-start marker

// Ids from kWpmFirstPiece on, in this order.
const std::vector<std::string> kPieces = {
    W "un",  W "unaff", "able", "aff", W "a",     "a",     "b",    W "hello", W "world", W ",", W "!", W "[",
    W "]",   W "cls",   W "caf", "e",  W "\xE4\xB8\xAD",  W "\xE6\x96\x87", "s",  W "it", "'", W "'", W "s"};

int32_t Id(absl::string_view piece) {
  for (size_t i = 0; i < kPieces.size(); ++i) {
    if (kPieces[i] == piece) return kWpmFirstPiece + static_cast<int32_t>(i);
  }
  ADD_FAILURE() << "no piece " << piece;
  return kNoToken;
}

Tokenizer Small() { return MakeTokenizer(WpmMetadata({.pieces = kPieces})); }

TEST(WpmTest, UnicodeMappings) {
  using tokenizer::NfdBase;
  using tokenizer::ToLower;
  EXPECT_EQ(NfdBase(0xE9), 'e');      // é
  EXPECT_EQ(NfdBase(0xC5), 'A');      // Å
  EXPECT_EQ(NfdBase(0x212B), 'A');    // Ångström sign
  EXPECT_EQ(NfdBase(0x1FEF), '`');    // Greek varia
  EXPECT_EQ(NfdBase(0xAC00), 0x1100);  // Hangul 가 -> its leading jamo
  EXPECT_EQ(NfdBase('a'), 'a');
  EXPECT_EQ(NfdBase(0x4E2D), 0x4E2Du);
  EXPECT_EQ(ToLower('A'), 'a');
  EXPECT_EQ(ToLower(0x130), 'i');    // İ
  EXPECT_EQ(ToLower(0x100), 0x101u);  // Ā, an alternating pair
  EXPECT_EQ(ToLower(0x101), 0x101u);
  EXPECT_EQ(ToLower(0x3A3), 0x3C3u);  // Σ
  EXPECT_EQ(ToLower(0x10400), 0x10428u);
  EXPECT_EQ(ToLower('a'), 'a');
  EXPECT_EQ(ToLower(0x10FFFF), 0x10FFFFu);
}

TEST(WpmTest, Words) {
  using tokenizer::WpmWords;
  EXPECT_EQ(WpmWords(""), Words{});
  EXPECT_EQ(WpmWords(" \t\n "), Words{});
  EXPECT_EQ(WpmWords("  Hello   WORLD "), (Words{"hello", "world"}));
  EXPECT_EQ(WpmWords("a,b!c"), (Words{"a", ",", "b", "!", "c"}));
  // ASCII symbols are words of their own; other symbols are not.
  EXPECT_EQ(WpmWords("1+1=2 a$b \xE2\x82\xAC" "5"), (Words{"1", "+", "1", "=", "2", "a", "$", "b", "\xE2\x82\xAC" "5"}));
  // Composed accents go; separate combining marks stay in the word.
  EXPECT_EQ(WpmWords("Caf\xC3\xA9 cafe\xCC\x81"), (Words{"cafe", "cafe\xCC\x81"}));
  // CJK ideographs are words of their own; kana are not.
  EXPECT_EQ(WpmWords("ab\xE4\xB8\xAD\xE6\x96\x87" "cd \xE3\x81\x82\xE3\x81\x84"),
            (Words{"ab", "\xE4\xB8\xAD", "\xE6\x96\x87", "cd", "\xE3\x81\x82\xE3\x81\x84"}));
  // Control and format characters, NUL and ill-formed bytes are dropped.
  EXPECT_EQ(WpmWords(std::string("a\x00" "b\x01" "c\xE2\x80\x8B" "d\xFF" "e", 11)), (Words{"abcde"}));
  // Unicode whitespace splits, NBSP and the ideographic space included.
  EXPECT_EQ(WpmWords("a\xC2\xA0" "b\xE3\x80\x80" "c"), (Words{"a", "b", "c"}));
  // A value above U+10FFFF is ill-formed here (llama.cpp aborts on it).
  EXPECT_EQ(WpmWords("x\xF4\x90\x80\x80y"), (Words{"xy"}));
}

TEST(WpmTest, GreedyLongestMatch) {
  const Tokenizer tokenizer = Small();
  EXPECT_EQ(tokenizer.kind(), TokenizerKind::kWordPiece);
  // "▁unaff" beats "▁un" even though "▁un" + "aff" + "able" would also cover it.
  EXPECT_EQ(tokenizer.Encode("unaffable", false, false), (Ids{Id(W "unaff"), Id("able")}));
  EXPECT_EQ(tokenizer.Encode("unable", false, false), (Ids{Id(W "un"), Id("able")}));
  EXPECT_EQ(tokenizer.Encode("abba", false, false), (Ids{Id(W "a"), Id("b"), Id("b"), Id("a")}));
}

TEST(WpmTest, WordWithAnUncoveredPartIsOneUnknown) {
  const Tokenizer tokenizer = Small();
  EXPECT_EQ(tokenizer.Encode("unaffablex", false, false), (Ids{1}));
  EXPECT_EQ(tokenizer.Encode("hello zzz world", false, false), (Ids{Id(W "hello"), 1, Id(W "world")}));
  // No "▁b": a word may not start with a continuation.
  EXPECT_EQ(tokenizer.Encode("b", false, false), (Ids{1}));
}

TEST(WpmTest, PunctuationCaseAccentsAndCjk) {
  const Tokenizer tokenizer = Small();
  EXPECT_EQ(tokenizer.Encode("HELLO, World!", false, false),
            (Ids{Id(W "hello"), Id(W ","), Id(W "world"), Id(W "!")}));
  EXPECT_EQ(tokenizer.Encode("CAF\xC3\x89", false, false), (Ids{Id(W "caf"), Id("e")}));
  EXPECT_EQ(tokenizer.Encode("\xE4\xB8\xAD\xE6\x96\x87", false, false),
            (Ids{Id(W "\xE4\xB8\xAD"), Id(W "\xE6\x96\x87")}));
  EXPECT_EQ(tokenizer.Encode("It's", false, false), (Ids{Id(W "it"), Id(W "'"), Id(W "s")}));
  EXPECT_EQ(tokenizer.Encode("", false, false), Ids{});
  EXPECT_EQ(tokenizer.Encode("  \n", false, false), Ids{});
}

TEST(WpmTest, SpecialTokens) {
  const Tokenizer tokenizer = Small();
  EXPECT_EQ(tokenizer.bos(), 2);
  EXPECT_EQ(tokenizer.unk(), 1);
  EXPECT_TRUE(tokenizer.add_bos());
  EXPECT_TRUE(tokenizer.add_eos());
  // add_special: [CLS] first and [SEP] last, also around nothing.
  EXPECT_EQ(tokenizer.Encode("hello", true, false), (Ids{2, Id(W "hello"), 3}));
  EXPECT_EQ(tokenizer.Encode("", true, false), (Ids{2, 3}));
  // ... whatever add_bos_token / add_eos_token say, as in llama.cpp.
  MetadataList kv = WpmMetadata({.pieces = kPieces});
  Set(kv, "tokenizer.ggml.add_bos_token", GgufValue::Bool(false));
  Set(kv, "tokenizer.ggml.add_eos_token", GgufValue::Bool(false));
  EXPECT_EQ(MakeTokenizer(kv).Encode("hello", true, false), (Ids{2, Id(W "hello"), 3}));
  // parse_special: control token text becomes the token.
  EXPECT_EQ(tokenizer.Encode("[CLS]hello[SEP]world", false, true), (Ids{2, Id(W "hello"), 3, Id(W "world")}));
  // Otherwise it is text: "[", "cls", "]" (lowercased).
  EXPECT_EQ(tokenizer.Encode("[CLS]", false, false), (Ids{Id(W "["), Id(W "cls"), Id(W "]")}));
}

TEST(WpmTest, UserDefinedTokensAreAlwaysMatched) {
  const Tokenizer tokenizer = MakeTokenizer(WpmMetadata({.pieces = kPieces, .extra = {{"<Tool>", 4}}}));
  const int32_t tool = tokenizer.Find("<Tool>");
  EXPECT_EQ(tokenizer.Encode("hello<Tool>world", false, false), (Ids{Id(W "hello"), tool, Id(W "world")}));
  EXPECT_EQ(tokenizer.Piece(tool, false), "<Tool>");
}

TEST(WpmTest, PiecesAndDecode) {
  const Tokenizer tokenizer = Small();
  EXPECT_EQ(tokenizer.Piece(Id(W "hello"), false), " hello");
  EXPECT_EQ(tokenizer.Piece(Id("able"), false), "able");
  EXPECT_EQ(tokenizer.Piece(2, false), "");
  EXPECT_EQ(tokenizer.Piece(2, true), "[CLS]");
  EXPECT_EQ(tokenizer.Piece(1, false), "");
  EXPECT_EQ(tokenizer.Piece(1, true), "[UNK]");
  EXPECT_EQ(tokenizer.Find(W "unaff"), Id(W "unaff"));
  EXPECT_EQ(tokenizer.Find("unaff"), kNoToken);
  // The leading space of the first word stays, as in llama.cpp's pieces.
  EXPECT_EQ(tokenizer.Decode(tokenizer.Encode("Unaffable world", true, false), false), " unaffable world");
  EXPECT_EQ(tokenizer.Decode(tokenizer.Encode("hello, world", true, false), true), "[CLS] hello , world[SEP]");
}

TEST(WpmTest, LlamaCppDefaultIds) {
  // Without id keys, a vocabulary of BERT's size gets BERT's ids.
  WpmVocabSpec spec;
  for (int i = 0; i < 200; ++i) spec.pieces.push_back(W + std::to_string(i));
  MetadataList kv = WpmMetadata(spec);
  for (const char* key : {"padding", "unknown", "bos", "seperator", "eos", "mask"}) {
    Remove(kv, std::string("tokenizer.ggml.") + key + "_token_id");
  }
  const Tokenizer tokenizer = MakeTokenizer(kv);
  EXPECT_EQ(tokenizer.unk(), 100);
  EXPECT_EQ(tokenizer.bos(), 101);
  EXPECT_EQ(tokenizer.eos(), kNoToken);
  EXPECT_EQ(tokenizer.Encode("", true, false), (Ids{101, 102}));
  EXPECT_EQ(tokenizer.Encode("nope", false, false), (Ids{100}));
}

void ExpectRejected(const MetadataList& kv, absl::string_view key) {
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::FromMetadata(kv);
  ASSERT_FALSE(tokenizer.ok()) << "accepted; expected an error naming " << key;
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument) << tokenizer.status();
  EXPECT_TRUE(absl::StrContains(tokenizer.status().message(), key)) << tokenizer.status();
}

TEST(WpmTest, TheSpecialTokensItNeedsMustExist) {
  // A small vocabulary has no default ids to fall back on.
  for (const char* key : {"unknown", "bos", "seperator"}) {
    SCOPED_TRACE(key);
    const std::string name = std::string("tokenizer.ggml.") + key + "_token_id";
    MetadataList kv = WpmMetadata({.pieces = kPieces});
    Remove(kv, name);
    ExpectRejected(kv, name);
    Set(kv, name, I32(-1));
    ExpectRejected(kv, name);
  }
  // No eos is fine: WordPiece ends with [SEP].
  MetadataList kv = WpmMetadata({.pieces = kPieces});
  Remove(kv, "tokenizer.ggml.eos_token_id");
  Set(kv, "tokenizer.ggml.add_eos_token", GgufValue::Bool(true));
  EXPECT_TRUE(Tokenizer::FromMetadata(kv).ok());
  // Duplicates are rejected as for the other kinds.
  Set(kv, "tokenizer.ggml.tokens", StringArrayValue({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "a"}));
  Remove(kv, "tokenizer.ggml.token_type");
  ExpectRejected(kv, "tokenizer.ggml.tokens");
}

TEST(WpmTest, LongWordsAndLongTokensStayLinear) {
  // A hostile vocabulary: a 64 KiB token beside the single letters. Cutting
  // a 64 KiB word must not try every length at every position.
  const std::string long_token = W + std::string(1 << 16, 'a');
  const Tokenizer tokenizer = MakeTokenizer(WpmMetadata({.pieces = {long_token, W "a", "a"}}));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(tokenizer.Encode(std::string(1 << 16, 'a'), false, false), (Ids{kWpmFirstPiece}));
  const Ids ids = tokenizer.Encode(std::string((1 << 16) - 1, 'a'), false, false);
  EXPECT_EQ(ids.size(), (size_t{1} << 16) - 1);
  EXPECT_EQ(tokenizer.Encode(std::string(1 << 17, 'a') + "b", false, false), (Ids{1}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace octo
