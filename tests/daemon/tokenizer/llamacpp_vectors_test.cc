// llama.cpp's own tokenizer test vectors (../shared/models/vocab, from
// llama.cpp's models/ directory): every input must give exactly the ids
// llama.cpp expects, and decode back to the input.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "storage/gguf_json.h"
#include "tests/daemon/tokenizer/tokenizer_test_util.h"
#include "tests/shared_data.h"

namespace octo {
namespace {

using ::octo::testing::Escaped;
using ::octo::testing::ReadVocabTestInputs;
using ::octo::testing::ReadVocabTestOutputs;
using ::octo::testing::SharedPath;
using ::octo::testing::SharedTokenizer;

void CheckVectors(const std::string& vocab, const std::string& expected_prefix) {
  const Tokenizer& tokenizer = SharedTokenizer("vocab/" + vocab);
  const std::vector<std::string> inputs = ReadVocabTestInputs(SharedPath("models/vocab/" + vocab + ".inp"));
  const std::vector<std::vector<int32_t>> outputs = ReadVocabTestOutputs(SharedPath("models/vocab/" + vocab + ".out"));
  ASSERT_EQ(inputs.size(), 46u);
  ASSERT_EQ(outputs.size(), inputs.size());
  int passed = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    // llama.cpp's test-tokenizer-0: add_special = false, parse_special = false.
    const std::vector<int32_t> ids = tokenizer.Encode(inputs[i], false, false);
    EXPECT_EQ(ids, outputs[i]) << "input " << i << ": \"" << Escaped(inputs[i]) << "\"";
    // Byte fallback / byte-level BPE lose nothing: the ids spell the input.
    const std::string expected_text = inputs[i].empty() ? "" : expected_prefix + inputs[i];
    EXPECT_EQ(tokenizer.Decode(ids, false), expected_text) << "input " << i;
    passed += ids == outputs[i];
  }
  std::cout << vocab << ": " << passed << " of " << inputs.size() << " inputs match llama.cpp\n";
}

TEST(LlamaCppVectorsTest, SentencePieceLlama) {
  OCTO_REQUIRE_SHARED("models/vocab/ggml-vocab-llama-spm.gguf");
  // Decoding keeps the "▁" put in front of the text as a space.
  CheckVectors("ggml-vocab-llama-spm.gguf", " ");
}

TEST(LlamaCppVectorsTest, Gpt2Bpe) {
  OCTO_REQUIRE_SHARED("models/vocab/ggml-vocab-gpt-2.gguf");
  CheckVectors("ggml-vocab-gpt-2.gguf", "");
}

TEST(LlamaCppVectorsTest, VocabularyFacts) {
  OCTO_REQUIRE_SHARED("models/vocab/ggml-vocab-gpt-2.gguf");
  const Tokenizer& spm = SharedTokenizer("vocab/ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(spm.kind(), TokenizerKind::kSentencePiece);
  EXPECT_EQ(spm.vocab_size(), 32000);
  EXPECT_EQ(spm.bos(), 1);
  EXPECT_EQ(spm.eos(), 2);
  EXPECT_TRUE(spm.add_bos());
  EXPECT_TRUE(spm.IsEndOfGeneration(2));
  EXPECT_FALSE(spm.IsEndOfGeneration(1));
  EXPECT_EQ(spm.Find("\xE2\x96\x81Hello"), 15043);
  EXPECT_EQ(spm.Piece(15043, false), " Hello");
  EXPECT_EQ(spm.Piece(13, false), "\n");  // <0x0A>
  EXPECT_EQ(spm.Piece(1, false), "");
  EXPECT_EQ(spm.Piece(1, true), "<s>");
  EXPECT_EQ(spm.Piece(0, false), "");  // <unk>
  EXPECT_EQ(spm.Piece(32000, true), "");
  EXPECT_EQ(spm.Piece(-1, true), "");

  const Tokenizer& bpe = SharedTokenizer("vocab/ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(bpe.kind(), TokenizerKind::kByteLevelBpe);
  EXPECT_EQ(bpe.vocab_size(), 50257);
  EXPECT_EQ(bpe.bos(), 50256);
  EXPECT_FALSE(bpe.add_bos());
  EXPECT_TRUE(bpe.IsEndOfGeneration(50256));
  EXPECT_EQ(bpe.Find("\xC4\xA0" "world"), 995);  // "Ġworld"
  EXPECT_EQ(bpe.Piece(995, false), " world");
  EXPECT_EQ(bpe.Piece(50256, false), "");
  EXPECT_EQ(bpe.Piece(50256, true), "<|endoftext|>");
  // With add_special a gpt-2 vocabulary adds nothing (add_bos defaults off).
  EXPECT_EQ(bpe.Encode("Hello world", true, false), (std::vector<int32_t>{15496, 995}));
  // parse_special: the text of <|endoftext|> becomes the token, or stays text.
  EXPECT_EQ(bpe.Encode("a<|endoftext|>b", false, true), (std::vector<int32_t>{64, 50256, 65}));
  const std::vector<int32_t> plain = bpe.Encode("a<|endoftext|>b", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 50256), 0);
  EXPECT_EQ(bpe.Decode(plain, false), "a<|endoftext|>b");
}

TEST(LlamaCppVectorsTest, SentencePieceSpecialTokensAndPrefix) {
  OCTO_REQUIRE_SHARED("models/vocab/ggml-vocab-llama-spm.gguf");
  const Tokenizer& spm = SharedTokenizer("vocab/ggml-vocab-llama-spm.gguf");
  // BOS by default; the "▁" prefix goes in front of text that starts the
  // input or follows a special token.
  EXPECT_EQ(spm.Encode("Hello", true, false), (std::vector<int32_t>{1, 15043}));
  EXPECT_EQ(spm.Encode("", true, false), (std::vector<int32_t>{1}));
  EXPECT_EQ(spm.Encode("", false, false), (std::vector<int32_t>{}));
  EXPECT_EQ(spm.Encode("<s>Hello</s>Hello", false, true), (std::vector<int32_t>{1, 15043, 2, 15043}));
  // Without parse_special "<s>" is just text.
  const std::vector<int32_t> plain = spm.Encode("<s>Hello", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0);
  EXPECT_EQ(spm.Decode(plain, false), " <s>Hello");
}

// The daemon builds its tokenizer from manifest.json, where decompose wrote
// the tokenizer.* keys as JSON: that path must give the same tokenizer.
TEST(LlamaCppVectorsTest, ManifestJsonGivesTheSameTokenizer) {
  OCTO_REQUIRE_SHARED("models/vocab/ggml-vocab-gpt-2.gguf");
  for (const std::string vocab : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"}) {
    SCOPED_TRACE(vocab);
    MetadataList from_json;
    for (const auto& [key, value] : testing::SharedModelMetadata("vocab/" + vocab)) {
      if (key.rfind("tokenizer.", 0) != 0) continue;
      absl::StatusOr<GgufValue> round_trip = GgufValueFromJson(nlohmann::json::parse(GgufValueToJson(value).dump()));
      ASSERT_TRUE(round_trip.ok()) << key << ": " << round_trip.status();
      from_json.emplace_back(key, *std::move(round_trip));
    }
    absl::StatusOr<Tokenizer> tokenizer = Tokenizer::FromMetadata(from_json);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    const Tokenizer& direct = SharedTokenizer("vocab/" + vocab);
    for (const std::string& input : ReadVocabTestInputs(SharedPath("models/vocab/" + vocab + ".inp"))) {
      EXPECT_EQ(tokenizer->Encode(input, true, true), direct.Encode(input, true, true)) << Escaped(input);
    }
  }
}

}  // namespace
}  // namespace octo
