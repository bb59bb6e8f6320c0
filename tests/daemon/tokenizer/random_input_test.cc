// Random byte strings, well-formed UTF-8 or not: encoding never produces an
// id outside the vocabulary, and decoding gives the input back (SentencePiece
// keeps every byte through byte fallback, spaces aside; byte-level BPE turns
// each ill-formed byte into U+FFFD, as llama.cpp does).
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "daemon/tokenizer/tokenizer.h"
#include "daemon/tokenizer/unicode.h"
#include "gtest/gtest.h"
#include "tests/daemon/tokenizer/tokenizer_test_util.h"
#include "tests/shared_data.h"

namespace octo {
namespace {

using ::octo::testing::Escaped;

// Bytes drawn mostly from ASCII letters, spaces and newlines, with UTF-8
// lead and continuation bytes mixed in; "▁" (which SentencePiece decodes as
// a space) is left out.
std::string RandomText(std::mt19937& rng) {
  static const std::string kAlphabet = "aAbZ09 \n\t'!.<>|_";
  std::uniform_int_distribution<int> length(0, 40), kind(0, 9), any(0, 255), pick(0, kAlphabet.size() - 1);
  std::string out;
  for (int i = length(rng); i > 0; --i) {
    out += kind(rng) < 7 ? kAlphabet[pick(rng)] : static_cast<char>(any(rng));
  }
  while (absl::StrContains(out, "\xE2\x96\x81")) out.erase(out.find("\xE2\x96\x81"), 1);
  return out;
}

std::string Sanitized(const std::string& bytes) {
  std::string out;
  for (uint32_t cp : tokenizer::DecodeUtf8All(bytes)) tokenizer::AppendUtf8(cp, &out);
  return out;
}

void CheckRandomInputs(const Tokenizer& tokenizer, bool lossless) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 1000; ++round) {
    const std::string text = RandomText(rng);
    const std::vector<int32_t> ids = tokenizer.Encode(text, false, false);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tokenizer.vocab_size()) << Escaped(text);
    std::string decoded = tokenizer.Decode(ids, false);
    if (lossless) {
      // A space is "▁", decoded back to " " unless ill-formed input put the
      // "▁" bytes into a symbol with other bytes, so that they fell back to
      // byte tokens (llama.cpp cuts symbols the same way).
      decoded = absl::StrReplaceAll(decoded, {{"\xE2\x96\x81", " "}});
    }
    const std::string expected = lossless ? (text.empty() ? "" : " " + text) : Sanitized(text);
    ASSERT_EQ(decoded, expected) << Escaped(text);
    // parse_special may only turn special-token text into those tokens.
    tokenizer.Encode(text, true, true);
  }
}

TEST(RandomInputTest, SentencePiece) {
  OCTO_REQUIRE_SHARED("models/vocab/ggml-vocab-llama-spm.gguf");
  CheckRandomInputs(testing::SharedTokenizer("vocab/ggml-vocab-llama-spm.gguf"), /*lossless=*/true);
}

TEST(RandomInputTest, Gpt2Bpe) {
  OCTO_REQUIRE_SHARED("models/vocab/ggml-vocab-gpt-2.gguf");
  CheckRandomInputs(testing::SharedTokenizer("vocab/ggml-vocab-gpt-2.gguf"), /*lossless=*/false);
}

TEST(RandomInputTest, SmallVocabularies) {
  testing::SpmVocabSpec spm;
  spm.pieces = {"\xE2\x96\x81", "a", "b", "ab", "\xE2\x96\x81" "a"};
  absl::StatusOr<Tokenizer> spm_tokenizer = Tokenizer::FromMetadata(testing::SpmMetadata(spm));
  ASSERT_TRUE(spm_tokenizer.ok()) << spm_tokenizer.status();
  CheckRandomInputs(*spm_tokenizer, /*lossless=*/true);
  for (const std::string pre : {"gpt-2", "qwen2", "default", "smollm", "falcon"}) {
    SCOPED_TRACE(pre);
    testing::BpeVocabSpec bpe;
    bpe.pre = pre;
    bpe.merges = {"a b", "\xC4\xA0 a", "\xC4\xA0" "a b", "' a"};
    absl::StatusOr<Tokenizer> bpe_tokenizer = Tokenizer::FromMetadata(testing::BpeMetadata(bpe));
    ASSERT_TRUE(bpe_tokenizer.ok()) << bpe_tokenizer.status();
    CheckRandomInputs(*bpe_tokenizer, /*lossless=*/false);
  }
}

}  // namespace
}  // namespace octo
