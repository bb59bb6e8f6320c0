// The prompts and generations llama.cpp's server recorded for the models in
// ../shared (reference/llamacpp-greedy.jsonl): the prompt tokenizes to the
// recorded prompt_tokens (BOS included), and the generated tokens, streamed,
// detokenize to the recorded text.
#include <fstream>
#include <string>
#include <vector>

#include "daemon/tokenizer/streaming_detokenizer.h"
#include "daemon/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/daemon/tokenizer/tokenizer_test_util.h"
#include "tests/shared_data.h"

namespace octo {
namespace {

using ::octo::testing::SharedPath;
using ::octo::testing::SharedTokenizer;

TEST(ReferenceTest, PromptTokensAndGeneratedText) {
  OCTO_REQUIRE_SHARED("reference/llamacpp-greedy.jsonl");
  std::ifstream in(SharedPath("reference/llamacpp-greedy.jsonl"));
  int records = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json record = nlohmann::json::parse(line);
    const std::string model = record.at("model");
    SCOPED_TRACE(model);
    const Tokenizer& tokenizer = SharedTokenizer(model);

    // The server tokenizes prompts with add_special and parse_special.
    const std::vector<int32_t> prompt_tokens = record.at("prompt_tokens");
    EXPECT_EQ(tokenizer.Encode(record.at("prompt").get<std::string>(), true, true), prompt_tokens);

    const std::vector<int32_t> tokens = record.at("tokens");
    StreamingDetokenizer stream(tokenizer);
    std::string streamed;
    for (int32_t id : tokens) streamed += stream.Push(id);
    streamed += stream.Flush();
    EXPECT_EQ(streamed, record.at("text").get<std::string>());
    EXPECT_EQ(tokenizer.Decode(tokens, false), record.at("text").get<std::string>());
    ++records;
  }
  EXPECT_EQ(records, 44);
}

TEST(ReferenceTest, TinyStoriesTiesMergeLeftmostFirst) {
  // Every score in this vocabulary is -1000, so llama.cpp's tie rule (the
  // leftmost pair first) alone decides the merges.
  OCTO_REQUIRE_SHARED("models/TinyStories-656K-Q8_0.gguf");
  const Tokenizer& tokenizer = SharedTokenizer("TinyStories-656K-Q8_0.gguf");
  EXPECT_EQ(tokenizer.Encode("Once upon a time", true, true), (std::vector<int32_t>{1, 80, 147, 201, 282, 57}));
  // No byte tokens: a character missing from the vocabulary becomes <unk>.
  EXPECT_EQ(tokenizer.Encode("\xC3\xA9", false, false), (std::vector<int32_t>{80, 0}));
  EXPECT_TRUE(tokenizer.IsEndOfGeneration(2));  // <|end_story|>
}

TEST(ReferenceTest, Stories260KNoneIds) {
  // seperator and padding ids are u32 -1 there: "none", not an error.
  OCTO_REQUIRE_SHARED("models/stories260K.gguf");
  const Tokenizer& tokenizer = SharedTokenizer("stories260K.gguf");
  EXPECT_EQ(tokenizer.vocab_size(), 512);
  EXPECT_EQ(tokenizer.bos(), 1);
  EXPECT_EQ(tokenizer.unk(), 0);
}

}  // namespace
}  // namespace octo
