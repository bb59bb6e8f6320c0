// The WordPiece vocabulary the test-model generator makes (MakeVocab for
// tokenizer "bert"), read back from the GGUF metadata octo-make-model writes:
// it matches the ids llama.cpp gives for it (tests/data/llamacpp-wpm.*, made
// by gen_llamacpp_wpm_vectors.py with llama-tokenize), tokenizes English into
// several pieces per word, and survives random input.
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "daemon/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "storage/byte_source.h"
#include "storage/gguf.h"
#include "tests/daemon/tokenizer/tokenizer_test_util.h"
#include "tests/tools/model_presets.h"
#include "tests/tools/model_tensors.h"

namespace octo {
namespace {

using ::octo::testing::Escaped;
using Ids = std::vector<int32_t>;

// The vocabulary size the vectors were made for (octo-make-model --vocab).
constexpr uint32_t kVectorsVocabSize = 4000;

testing::ModelShape BertShape(uint32_t vocab_size) {
  absl::StatusOr<testing::ModelShape> shape = testing::FindPreset("tiny");
  EXPECT_TRUE(shape.ok()) << shape.status();
  shape->tokenizer_model = "bert";
  shape->tokenizer_pre = "";
  shape->vocab_size = vocab_size;
  return *shape;
}

// The tokenizer of the GGUF header octo-make-model would write.
Tokenizer GeneratedTokenizer(uint32_t vocab_size) {
  const testing::ModelShape shape = BertShape(vocab_size);
  absl::StatusOr<testing::GeneratedVocab> vocab = testing::MakeVocab(shape);
  EXPECT_TRUE(vocab.ok()) << vocab.status();
  testing::GgufWriter writer;
  testing::AddModelMetadata(shape, *testing::ParseTypeRecipe("F32"), *vocab, writer);
  absl::StatusOr<std::string> header = writer.HeaderBytes();
  EXPECT_TRUE(header.ok()) << header.status();
  absl::StatusOr<GgufFile> gguf =
      GgufFile::Parse(std::make_unique<MemorySource>(std::vector<uint8_t>(header->begin(), header->end())));
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  return testing::MakeTokenizer(gguf->metadata());
}

TEST(WpmGeneratedTest, MatchesLlamaCpp) {
  const Tokenizer tokenizer = GeneratedTokenizer(kVectorsVocabSize);
  const std::string base = OCTO_LLAMACPP_WPM_VECTORS;
  const std::vector<std::string> inputs = testing::ReadVocabTestInputs(base + ".inp");
  const std::vector<Ids> plain = testing::ReadVocabTestOutputs(base + ".out");
  const std::vector<Ids> special = testing::ReadVocabTestOutputs(base + ".special.out");
  ASSERT_EQ(inputs.size(), 82u);
  ASSERT_EQ(plain.size(), inputs.size());
  ASSERT_EQ(special.size(), inputs.size());
  int passed = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    // .out: add_special and parse_special off; .special.out: both on.
    const Ids ids = tokenizer.Encode(inputs[i], false, false);
    const Ids special_ids = tokenizer.Encode(inputs[i], true, true);
    EXPECT_EQ(ids, plain[i]) << "input " << i << ": \"" << Escaped(inputs[i]) << "\"";
    EXPECT_EQ(special_ids, special[i]) << "input " << i << ": \"" << Escaped(inputs[i]) << "\"";
    passed += ids == plain[i] && special_ids == special[i];
  }
  std::cout << "generated bert vocabulary: " << passed << " of " << inputs.size() << " inputs match llama.cpp\n";
}

TEST(WpmGeneratedTest, VocabularyShape) {
  for (uint32_t vocab_size : {141u, 600u, 30522u}) {
    SCOPED_TRACE(vocab_size);
    const testing::ModelShape shape = BertShape(vocab_size);
    EXPECT_EQ(testing::MinVocabSize(shape), 141u);
    const testing::GeneratedVocab vocab = *testing::MakeVocab(shape);
    ASSERT_EQ(vocab.tokens.size(), vocab_size);
    EXPECT_EQ(vocab.tokens[0], "[PAD]");
    EXPECT_EQ(vocab.tokens[1], "[UNK]");
    EXPECT_EQ(vocab.tokens[2], "[CLS]");
    EXPECT_EQ(vocab.tokens[3], "[SEP]");
    EXPECT_EQ(vocab.tokens[4], "[MASK]");
    EXPECT_EQ(vocab.token_types[1], testing::kTokenUnknown);
    EXPECT_EQ(vocab.token_types[4], testing::kTokenControl);
    absl::flat_hash_set<std::string> seen;
    for (size_t id = 5; id < vocab.tokens.size(); ++id) {
      const std::string& token = vocab.tokens[id];
      EXPECT_TRUE(seen.insert(token).second) << token;
      EXPECT_EQ(vocab.token_types[id], testing::kTokenNormal) << token;
      for (char c : token) EXPECT_FALSE(c >= 'A' && c <= 'Z') << token;
    }
    EXPECT_TRUE(vocab.merges.empty());
    EXPECT_TRUE(vocab.scores.empty());
    EXPECT_EQ(*vocab.sep_id, 3u);
    EXPECT_TRUE(vocab.add_eos);
  }
  testing::ModelShape too_small = BertShape(140);
  EXPECT_FALSE(testing::MakeVocab(too_small).ok());
}

TEST(WpmGeneratedTest, EnglishTakesSeveralPiecesAndFewUnknowns) {
  const Tokenizer tokenizer = GeneratedTokenizer(600);
  EXPECT_EQ(tokenizer.kind(), TokenizerKind::kWordPiece);
  const std::string text = "Once upon a time, the small model tested 42 tokens: it was the first story!";
  const Ids ids = tokenizer.Encode(text, true, false);
  ASSERT_GT(ids.size(), 20u);
  EXPECT_EQ(ids.front(), tokenizer.bos());
  EXPECT_EQ(tokenizer.TokenText(ids.back()), "[SEP]");
  for (int32_t id : ids) EXPECT_NE(id, tokenizer.unk());
  EXPECT_EQ(tokenizer.Decode(ids, false),
            " once upon a time , the small model tested 42 tokens : it was the first story !");
}

// Random bytes: ids in range, nothing crashes, and lowercase ASCII words
// separated by single spaces come back as they went in.
TEST(WpmGeneratedTest, RandomInput) {
  for (uint32_t vocab_size : {141u, 4000u}) {
    SCOPED_TRACE(vocab_size);
    const Tokenizer tokenizer = GeneratedTokenizer(vocab_size);
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> length(0, 60), byte(0, 255), letter('a', 'z'), kind(0, 9);
    for (int round = 0; round < 500; ++round) {
      std::string text, words;
      for (int i = length(rng); i > 0; --i) {
        text += kind(rng) < 6 ? static_cast<char>(letter(rng)) : static_cast<char>(byte(rng));
        words += kind(rng) < 8 ? static_cast<char>(letter(rng)) : ' ';
      }
      for (const Ids& ids : {tokenizer.Encode(text, false, false), tokenizer.Encode(text, true, true)}) {
        for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tokenizer.vocab_size()) << Escaped(text);
        tokenizer.Decode(ids, true);
      }
      // Single letters are all in the vocabulary: nothing is unknown.
      std::string normalized;
      for (std::istringstream in(words); in >> text;) normalized += " " + text;
      ASSERT_EQ(tokenizer.Decode(tokenizer.Encode(words, false, false), false), normalized) << words;
    }
  }
}

}  // namespace
}  // namespace octo
