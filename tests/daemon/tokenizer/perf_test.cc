// Throughput on 100 KB inputs with the real 32K SentencePiece and 50K GPT-2
// vocabularies: merging is a priority queue over linked symbols, so even one
// 100 KB word must not take quadratic time. Prints MB/s; asserts no timing,
// only that the ids spell the input.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "daemon/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/daemon/tokenizer/tokenizer_test_util.h"
#include "tests/shared_data.h"

namespace octo {
namespace {

constexpr size_t kTextBytes = 100 * 1024;

std::string Repeat(const std::string& unit) {
  std::string out;
  while (out.size() < kTextBytes) out += unit;
  out.resize(kTextBytes);
  return out;
}

// Prose with a little of everything: punctuation, digits, newlines, accents,
// CJK and emoji. Cut at a byte count, so it may end inside a character.
std::string Prose() {
  return Repeat(
      "Once upon a time, in a village by the sea, there lived 3 cats and 12,345 fish. "
      "\"Don't go!\" said Lily's mother.\n\nThe caf\xC3\xA9 served cr\xC3\xA8me br\xC3\xBBl\xC3\xA9" "e; "
      "\xE4\xB8\xAD\xE6\x96\x87 text and \xF0\x9F\xA6\x99 llamas \xE2\x80\x94 all of it.\t(ok)  ");
}

void Measure(const Tokenizer& tokenizer, const std::string& name, const std::string& text,
             const std::string& expected_decoding) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tokenizer.Encode(text, false, false);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("  %-28s %7zu bytes -> %6zu tokens  %8.2f ms  %7.1f MB/s\n", name.c_str(), text.size(), ids.size(),
              seconds * 1e3, text.size() / seconds / 1e6);
  EXPECT_EQ(tokenizer.Decode(ids, false), expected_decoding) << name;
}

TEST(PerfTest, SentencePiece32K) {
  OCTO_REQUIRE_SHARED("models/vocab/ggml-vocab-llama-spm.gguf");
  const Tokenizer& tokenizer = testing::SharedTokenizer("vocab/ggml-vocab-llama-spm.gguf");
  std::printf("SentencePiece, %d tokens:\n", tokenizer.vocab_size());
  // SentencePiece keeps every byte (byte fallback) and adds the "▁" prefix.
  for (const auto& [name, text] : {std::pair<std::string, std::string>{"prose", Prose()},
                                   {"one 100 KB word", Repeat("abcdefghij")},
                                   {"one letter repeated", Repeat("a")},
                                   {"spaces", Repeat(" ")}}) {
    Measure(tokenizer, name, text, " " + text);
  }
}

TEST(PerfTest, Gpt2Bpe50K) {
  OCTO_REQUIRE_SHARED("models/vocab/ggml-vocab-gpt-2.gguf");
  const Tokenizer& tokenizer = testing::SharedTokenizer("vocab/ggml-vocab-gpt-2.gguf");
  std::printf("GPT-2 BPE, %d tokens:\n", tokenizer.vocab_size());
  std::string prose = Prose();
  while ((prose.back() & 0xC0) == 0x80 || (prose.back() & 0xC0) == 0xC0) prose.pop_back();  // whole characters
  for (const auto& [name, text] : {std::pair<std::string, std::string>{"prose", prose},
                                   {"one 100 KB word", Repeat("abcdefghij")},
                                   {"one letter repeated", Repeat("a")},
                                   {"spaces", Repeat(" ")},
                                   {"punctuation", Repeat("!?")}}) {
    Measure(tokenizer, name, text, text);
  }
}

}  // namespace
}  // namespace octo
