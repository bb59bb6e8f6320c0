// SentencePiece on vocabularies built here: best-score merging, byte
// fallback and <unk>, the "▁" prefix, special and user-defined tokens, and
// the add_* flags.
#include <string>
#include <utility>
#include <vector>

#include "daemon/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/daemon/tokenizer/tokenizer_test_util.h"

namespace octo {
namespace {

using ::octo::testing::Set;
using ::octo::testing::MakeTokenizer;
using ::octo::testing::SpmMetadata;
using ::octo::testing::SpmVocabSpec;
using Ids = std::vector<int32_t>;

constexpr char kSpace[] = "\xE2\x96\x81";  // ▁
constexpr int32_t kFirstPiece = 3 + 256;   // after <unk> <s> </s> and the byte tokens

SpmVocabSpec Spec(std::vector<std::string> pieces, std::vector<std::pair<std::string, int32_t>> extra = {}) {
  SpmVocabSpec spec;
  spec.pieces = std::move(pieces);
  spec.extra = std::move(extra);
  return spec;
}

int32_t ByteToken(unsigned char byte) { return 3 + byte; }

TEST(SpmTest, BestScoringPairMergesFirst) {
  // Pieces are scored by position: the first is the best.
  const Tokenizer ab_better = MakeTokenizer(SpmMetadata(Spec({"ab", "bc", kSpace, "a", "b", "c"})));
  const int32_t space = kFirstPiece + 2, a = kFirstPiece + 3, c = kFirstPiece + 5;
  const int32_t ab = kFirstPiece;  // in ab_better; "bc" in bc_better
  EXPECT_EQ(ab_better.Encode("abc", false, false), (Ids{space, ab, c}));
  const Tokenizer bc_better = MakeTokenizer(SpmMetadata(Spec({"bc", "ab", kSpace, "a", "b", "c"})));
  const int32_t bc = kFirstPiece;
  EXPECT_EQ(bc_better.Encode("abc", false, false), (Ids{space, a, bc}));
  EXPECT_EQ(ab_better.Piece(ab, false), "ab");
  EXPECT_EQ(ab_better.Decode(ab_better.Encode("abc", false, false), false), " abc");
}

TEST(SpmTest, MergedPiecesGrowAcrossSpaces) {
  const std::string space_a = std::string(kSpace) + "a";
  const Tokenizer tokenizer =
      MakeTokenizer(SpmMetadata(Spec({space_a + kSpace + "b", space_a + kSpace, space_a, kSpace, "a", "b"})));
  // "a b" -> "▁a▁b" -> one piece, made of "▁a" + "▁" + "b".
  EXPECT_EQ(tokenizer.Encode("a b", false, false), (Ids{kFirstPiece}));
  EXPECT_EQ(tokenizer.Piece(kFirstPiece, false), " a b");
}

TEST(SpmTest, ByteFallbackAndUnknown) {
  const Tokenizer with_bytes = MakeTokenizer(SpmMetadata(Spec({kSpace, "a"})));
  // é (C3 A9) has no piece: its bytes.
  EXPECT_EQ(with_bytes.Encode("a\xC3\xA9", false, false),
            (Ids{kFirstPiece, kFirstPiece + 1, ByteToken(0xC3), ByteToken(0xA9)}));
  EXPECT_EQ(with_bytes.Decode(with_bytes.Encode("a\xC3\xA9", false, false), false), " a\xC3\xA9");

  SpmVocabSpec spec = Spec({kSpace, "a"});
  spec.byte_tokens = false;
  const Tokenizer no_bytes = MakeTokenizer(SpmMetadata(spec));
  // No byte tokens: one <unk> per character; <unk> renders as nothing.
  const Ids ids = no_bytes.Encode("a\xC3\xA9" "a", false, false);
  EXPECT_EQ(ids, (Ids{3, 4, 0, 4}));
  EXPECT_EQ(no_bytes.Decode(ids, false), " aa");
  EXPECT_EQ(no_bytes.Decode(ids, true), " a<unk>a");
}

TEST(SpmTest, SpacePrefixFollowsTheFlag) {
  MetadataList kv = SpmMetadata(Spec({kSpace, "a", "b"}));
  const Tokenizer with_prefix = MakeTokenizer(kv);
  const int32_t space = kFirstPiece, a = kFirstPiece + 1, b = kFirstPiece + 2;
  EXPECT_EQ(with_prefix.Encode("a b", false, false), (Ids{space, a, space, b}));
  Set(kv, "tokenizer.ggml.add_space_prefix", GgufValue::Bool(false));
  const Tokenizer without = MakeTokenizer(kv);
  EXPECT_EQ(without.Encode("a b", false, false), (Ids{a, space, b}));
}

TEST(SpmTest, AddSpecialFollowsTheFlags) {
  MetadataList kv = SpmMetadata(Spec({kSpace, "a"}));
  EXPECT_EQ(MakeTokenizer(kv).Encode("a", true, false), (Ids{1, kFirstPiece, kFirstPiece + 1}));
  Set(kv, "tokenizer.ggml.add_bos_token", GgufValue::Bool(false));
  Set(kv, "tokenizer.ggml.add_eos_token", GgufValue::Bool(true));
  const Tokenizer tokenizer = MakeTokenizer(kv);
  EXPECT_FALSE(tokenizer.add_bos());
  EXPECT_TRUE(tokenizer.add_eos());
  EXPECT_EQ(tokenizer.Encode("a", true, false), (Ids{kFirstPiece, kFirstPiece + 1, 2}));
  EXPECT_EQ(tokenizer.Encode("a", false, false), (Ids{kFirstPiece, kFirstPiece + 1}));
}

TEST(SpmTest, SpecialAndUserDefinedTokens) {
  const Tokenizer tokenizer =
      MakeTokenizer(SpmMetadata(Spec({kSpace, "a", "b"}, {{"<|im_end|>", 3}, {"<tool>", 4}, {"<unused0>", 5}})));
  const int32_t space = kFirstPiece, a = kFirstPiece + 1, b = kFirstPiece + 2;
  const int32_t im_end = kFirstPiece + 3, tool = kFirstPiece + 4, unused = kFirstPiece + 5;
  // Control text is a token only with parse_special; text after a special
  // token gets the "▁" prefix again.
  EXPECT_EQ(tokenizer.Encode("a<|im_end|>b", false, true), (Ids{space, a, im_end, space, b}));
  const Ids plain = tokenizer.Encode("a<|im_end|>b", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), im_end), 0);
  EXPECT_EQ(tokenizer.Decode(plain, false), " a<|im_end|>b");
  // User-defined tokens are always matched and always rendered as written.
  EXPECT_EQ(tokenizer.Encode("a<tool>b", false, false), (Ids{space, a, tool, space, b}));
  EXPECT_EQ(tokenizer.Piece(tool, false), "<tool>");
  // <|im_end|> ends a generation by its name; unused tokens render as nothing.
  EXPECT_TRUE(tokenizer.IsEndOfGeneration(im_end));
  EXPECT_EQ(tokenizer.eot(), im_end);
  EXPECT_TRUE(tokenizer.IsEndOfGeneration(2));
  EXPECT_EQ(tokenizer.Piece(unused, true), "");
  EXPECT_EQ(tokenizer.Type(unused), TokenType::kUnused);
  EXPECT_EQ(tokenizer.TokenText(unused), "<unused0>");
  EXPECT_EQ(tokenizer.Find("<tool>"), tool);
  EXPECT_EQ(tokenizer.Find("nope"), kNoToken);
}

}  // namespace
}  // namespace octo
