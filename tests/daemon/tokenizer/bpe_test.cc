// Byte-level BPE on vocabularies built here: merge order, the llama-3 "take a
// token word whole" rule, special tokens, and round trips on the generator's
// Llama-3 and Qwen2 style vocabularies (tests/tools/model_presets.h).
#include <string>
#include <utility>
#include <vector>

#include "daemon/tokenizer/bpe.h"
#include "daemon/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/daemon/tokenizer/tokenizer_test_util.h"
#include "tests/tools/model_presets.h"

namespace octo {
namespace {

using ::octo::testing::BpeMetadata;
using ::octo::testing::BpeVocabSpec;
using ::octo::testing::Escaped;
using ::octo::testing::MakeTokenizer;
using ::octo::testing::Set;
using ::octo::testing::U32;
using Ids = std::vector<int32_t>;

constexpr int32_t kFirstMerged = 256;  // ids below are the byte characters, id == byte

BpeVocabSpec Spec(std::vector<std::string> merges, std::vector<std::pair<std::string, int32_t>> extra = {}) {
  BpeVocabSpec spec;
  spec.merges = std::move(merges);
  spec.extra = std::move(extra);
  return spec;
}

TEST(ByteLevelTest, TableIsGpt2s) {
  const auto& table = tokenizer::ByteToUnicode();
  EXPECT_EQ(table['A'], "A");
  EXPECT_EQ(table[' '], "\xC4\xA0");   // Ġ U+0120
  EXPECT_EQ(table['\n'], "\xC4\x8A");  // Ċ U+010A
  EXPECT_EQ(table[0], "\xC4\x80");     // Ā U+0100
  EXPECT_EQ(table[0xAD], "\xC5\x83");  // U+0143, the last of the 68
  EXPECT_EQ(table[0xFF], "\xC3\xBF");  // ÿ stands for itself
  for (int byte = 0; byte < 256; ++byte) {
    EXPECT_EQ(tokenizer::ByteLevelDecode(table[byte]), std::string(1, static_cast<char>(byte))) << byte;
  }
  EXPECT_EQ(tokenizer::ByteLevelDecode("\xC4\xA0world\xE2\x82\xAC"), " world\xE2\x82\xAC");  // € kept as is
}

TEST(BpeTest, LowestRankMergesFirst) {
  const Tokenizer ab_first = MakeTokenizer(BpeMetadata(Spec({"a b", "b c"})));
  EXPECT_EQ(ab_first.Encode("abc", false, false), (Ids{kFirstMerged, 'c'}));
  const Tokenizer bc_first = MakeTokenizer(BpeMetadata(Spec({"b c", "a b"})));
  EXPECT_EQ(bc_first.Encode("abc", false, false), (Ids{'a', kFirstMerged}));
  // Equal pairs: the leftmost merges first ("aaa" -> "aa" "a").
  const Tokenizer aa = MakeTokenizer(BpeMetadata(Spec({"a a"})));
  EXPECT_EQ(aa.Encode("aaa", false, false), (Ids{kFirstMerged, 'a'}));
}

TEST(BpeTest, MergesChainWithinWordsOnly) {
  // "Ġ t" -> 256 "Ġt", "h e" -> 257 "he", "Ġt he" -> 258 "Ġthe"
  const Tokenizer tokenizer = MakeTokenizer(BpeMetadata(Spec({"\xC4\xA0 t", "h e", "\xC4\xA0t he"})));
  EXPECT_EQ(tokenizer.Encode(" the the", false, false), (Ids{258, 258}));
  EXPECT_EQ(tokenizer.Encode("the", false, false), (Ids{'t', 257}));
  // "e t" would need a merge across the words "the" and " the".
  EXPECT_EQ(tokenizer.Encode("the the", false, false), (Ids{'t', 257, 258}));
  EXPECT_EQ(tokenizer.Piece(258, false), " the");
}

TEST(BpeTest, Llama3TakesATokenWordWhole) {
  // "abc" is a token no merge reaches. llama-bpe takes it whole; gpt-2 does not.
  BpeVocabSpec spec = Spec({"a b"}, {{"abc", 1}, {"<|begin_of_text|>", 3}});
  const Tokenizer gpt2 = MakeTokenizer(BpeMetadata(spec));
  EXPECT_EQ(gpt2.Encode("abc", false, false), (Ids{kFirstMerged, 'c'}));
  spec.pre = "llama-bpe";
  MetadataList kv = BpeMetadata(spec);
  Set(kv, "tokenizer.ggml.bos_token_id", U32(258));
  const Tokenizer llama3 = MakeTokenizer(kv);
  EXPECT_EQ(llama3.Encode("abc", false, false), (Ids{257}));
  // Llama-3 adds BOS by default.
  EXPECT_TRUE(llama3.add_bos());
  EXPECT_EQ(llama3.Encode("abc", true, false), (Ids{258, 257}));
}

TEST(BpeTest, IllFormedBytesBecomeReplacementCharacters) {
  const Tokenizer tokenizer = MakeTokenizer(BpeMetadata({}));
  const Ids ids = tokenizer.Encode("a\xFF" "b", false, false);
  EXPECT_EQ(tokenizer.Decode(ids, false), "a\xEF\xBF\xBD" "b");
}

TEST(BpeTest, SpecialTokens) {
  const Tokenizer tokenizer = MakeTokenizer(BpeMetadata(Spec({}, {{"<x>", 3}, {"<x><y>", 3}, {"<tool>", 4}})));
  const int32_t x = 256, xy = 257, tool = 258;
  // The longest special token wins; control tokens only with parse_special.
  EXPECT_EQ(tokenizer.Encode("a<x><y>b<x>", false, true), (Ids{'a', xy, 'b', x}));
  const Ids plain = tokenizer.Encode("a<x>b", false, false);
  EXPECT_EQ(plain, (Ids{'a', '<', 'x', '>', 'b'}));
  // User-defined tokens are matched either way, and always rendered.
  EXPECT_EQ(tokenizer.Encode("a<tool>b", false, false), (Ids{'a', tool, 'b'}));
  EXPECT_EQ(tokenizer.Piece(tool, false), "<tool>");
  EXPECT_EQ(tokenizer.Piece(x, false), "");
  EXPECT_EQ(tokenizer.Piece(x, true), "<x>");
}

MetadataList GeneratedMetadata(const std::string& pre, uint32_t vocab_size) {
  absl::StatusOr<testing::ModelShape> shape = testing::FindPreset("tiny-qwen2");
  EXPECT_TRUE(shape.ok()) << shape.status();
  shape->tokenizer_pre = pre;
  shape->vocab_size = vocab_size;
  absl::StatusOr<testing::GeneratedVocab> vocab = testing::MakeVocab(*shape);
  EXPECT_TRUE(vocab.ok()) << vocab.status();
  MetadataList kv;
  kv.emplace_back("tokenizer.ggml.model", GgufValue::String("gpt2"));
  kv.emplace_back("tokenizer.ggml.pre", GgufValue::String(pre));
  kv.emplace_back("tokenizer.ggml.tokens", testing::StringArrayValue(vocab->tokens));
  kv.emplace_back("tokenizer.ggml.token_type", testing::I32Array(vocab->token_types));
  kv.emplace_back("tokenizer.ggml.merges", testing::StringArrayValue(vocab->merges));
  kv.emplace_back("tokenizer.ggml.bos_token_id", U32(vocab->bos_id));
  kv.emplace_back("tokenizer.ggml.eos_token_id", U32(vocab->eos_id));
  kv.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::Bool(vocab->add_bos));
  return kv;
}

const char* const kRoundTripTexts[] = {
    "Hello world, this is a test of the tokenizer.",
    "I'M sure we'll see 12345 things, don't you think?",
    "  leading spaces\n\n\ttabs and\r\nnewlines   ",
    "na\xC3\xAFve caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xD9\xA3\xD9\xA4 \xF0\x9F\xA6\x99\xF0\x9F\x9A\x80!",
    "",
};

TEST(BpeTest, GeneratedVocabulariesRoundTrip) {
  for (const std::string pre : {"qwen2", "llama-bpe"}) {
    SCOPED_TRACE(pre);
    const Tokenizer tokenizer = MakeTokenizer(GeneratedMetadata(pre, 4000));
    ASSERT_EQ(tokenizer.vocab_size(), 4000);
    for (const char* text : kRoundTripTexts) {
      const Ids ids = tokenizer.Encode(text, false, false);
      EXPECT_EQ(tokenizer.Decode(ids, false), text) << Escaped(text);
      for (int32_t id : ids) EXPECT_EQ(tokenizer.Type(id), TokenType::kNormal);
    }
    // The merges do something: generated words come out in fewer tokens than bytes.
    std::string words;
    for (int32_t id = 300; id < 400; ++id) words += " " + tokenizer.Piece(id, false);
    EXPECT_LT(tokenizer.Encode(words, false, false).size(), words.size() / 2) << Escaped(words);
  }
}

TEST(BpeTest, GeneratedQwen2ChatTokens) {
  const Tokenizer tokenizer = MakeTokenizer(GeneratedMetadata("qwen2", 1000));
  const int32_t im_start = tokenizer.Find("<|im_start|>");
  const int32_t im_end = tokenizer.Find("<|im_end|>");
  ASSERT_NE(im_start, kNoToken);
  ASSERT_NE(im_end, kNoToken);
  const Ids ids = tokenizer.Encode("<|im_start|>user\nhi<|im_end|>", false, true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), im_start);
  EXPECT_EQ(ids.back(), im_end);
  EXPECT_EQ(tokenizer.Decode(ids, false), "user\nhi");
  EXPECT_EQ(tokenizer.Decode(ids, true), "<|im_start|>user\nhi<|im_end|>");
  EXPECT_TRUE(tokenizer.IsEndOfGeneration(im_end));
  EXPECT_TRUE(tokenizer.IsEndOfGeneration(tokenizer.Find("<|endoftext|>")));
  EXPECT_FALSE(tokenizer.IsEndOfGeneration(im_start));
  EXPECT_FALSE(tokenizer.add_bos());  // qwen2 says add_bos_token false
  EXPECT_EQ(tokenizer.Encode("hi", true, true), tokenizer.Encode("hi", false, true));
}

}  // namespace
}  // namespace octo
