// Constrained generation through the runtime: a random-weight model held to
// JSON gives text that parses, for every seed; a pattern grammar gives text
// of that pattern; a grammar that allows everything changes nothing; a bad
// grammar is refused naming the field; constrained and plain jobs share
// passes, each as if alone.
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "daemon/engine/model_files.h"
#include "daemon/tokenizer/tokenizer.h"
#include "storage/utf8.h"
#include "daemon/grammar/grammar_matcher.h"
#include "daemon/grammar/json_grammar.h"
#include "nlohmann/json.hpp"
#include "tests/daemon/core/core_test_util.h"

namespace octo::testing {
namespace {

constexpr uint32_t kLayers = 3;

class RuntimeGrammarTest : public GeneratedModelTest<kLayers> {
 protected:
  std::unique_ptr<RuntimeImpl> Start() {
    RuntimeOptions options = TestRuntimeOptions(model_dir_->path().string());
    options.model = "m";
    auto runtime = RuntimeImpl::Create(options, FileLayerStream::Factory());
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    return runtime.ok() ? std::move(*runtime) : nullptr;
  }

  static GenerateJob Sampled(const std::string& grammar, uint64_t seed, int max_tokens) {
    GenerateJob job = GreedyJob("Once upon a time", max_tokens);
    job.sampling.temperature = 1.0;
    job.sampling.top_k = 0;
    job.sampling.top_p = 1.0;
    job.sampling.min_p = 0;
    job.sampling.seed = seed;
    job.grammar = grammar;
    return job;
  }

  // The whole reply: the tokens' text and the held-back tail.
  static std::string Text(const CollectingSink& sink) { return sink.text; }
};

TEST_F(RuntimeGrammarTest, JsonModeGivesJsonForEverySeed) {
  auto runtime = Start();
  auto grammar = std::make_shared<const Grammar>(*Grammar::Parse(kJsonObjectGrammar));
  int whole = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::shared_ptr<CollectingSink> sink = Submit(*runtime, Sampled(kJsonObjectGrammar, seed, 400));
    ASSERT_TRUE(sink->Wait());
    ASSERT_TRUE(sink->status.ok()) << "seed " << seed << ": " << sink->status;
    const std::string text = Text(*sink);
    if (sink->finish_reason == "stop") {
      ++whole;
      EXPECT_TRUE(nlohmann::json::accept(text)) << "seed " << seed << ": " << text;
      EXPECT_TRUE(nlohmann::json::parse(text, nullptr, false).is_object()) << text;
    } else {
      // Cut short by max_tokens: a prefix of JSON the grammar still takes.
      EXPECT_EQ(sink->finish_reason, "length");
      GrammarMatcher matcher(grammar);
      EXPECT_TRUE(matcher.Accept(text)) << "seed " << seed << ": " << text;
    }
  }
  EXPECT_GT(whole, 0) << "some seed ends its object within 400 tokens";
}

TEST_F(RuntimeGrammarTest, APatternGrammarGivesThatPattern) {
  auto runtime = Start();
  const std::regex pattern("[0-9]{3}-[A-Z]{2}( (yes|no))?");
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    std::shared_ptr<CollectingSink> sink =
        Submit(*runtime, Sampled(R"(root ::= [0-9]{3} "-" [A-Z]{2} (" " ("yes" | "no"))?)", seed, 64));
    ASSERT_TRUE(sink->Wait());
    ASSERT_TRUE(sink->status.ok()) << sink->status;
    EXPECT_EQ(sink->finish_reason, "stop");
    EXPECT_TRUE(std::regex_match(Text(*sink), pattern)) << "seed " << seed << ": '" << Text(*sink) << "'";
  }
}

TEST_F(RuntimeGrammarTest, AGrammarAllowingAnyTextChangesNothingWhileTheModelWritesText) {
  auto runtime = Start();
  absl::StatusOr<Manifest> manifest = ReadManifest(model_dir_->Path("m"));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::FromMetadata(manifest->tokenizer);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto any_text = std::make_shared<const Grammar>(*Grammar::Parse("root ::= .*"));
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::shared_ptr<CollectingSink> plain = Submit(*runtime, Sampled("", seed, 32));
    std::shared_ptr<CollectingSink> constrained = Submit(*runtime, Sampled("root ::= .*", seed, 32));
    ASSERT_TRUE(plain->Wait() && constrained->Wait());
    ASSERT_TRUE(constrained->status.ok()) << constrained->status;
    // The random model's own tokens, as long as they spell characters (a
    // stray byte of a broken one is no text): the constrained job drew the
    // same, the sampled token being allowed.
    GrammarMatcher matcher(any_text);
    size_t same = 0;
    while (same < plain->tokens.size() && matcher.Accept(tokenizer->Piece(plain->tokens[same], false))) ++same;
    ASSERT_LE(same, constrained->tokens.size());
    EXPECT_EQ(std::vector<int32_t>(plain->tokens.begin(), plain->tokens.begin() + same),
              std::vector<int32_t>(constrained->tokens.begin(), constrained->tokens.begin() + same));
    // And the constrained text is well-formed UTF-8 throughout (max_tokens
    // may cut its last character short).
    std::string text = tokenizer->Decode(constrained->tokens, false);
    text.resize(text.size() - IncompleteUtf8Tail(text));
    EXPECT_TRUE(IsValidUtf8(text)) << "seed " << seed;
  }
}

TEST_F(RuntimeGrammarTest, ConstrainedAndPlainJobsSharePassesEachAsIfAlone) {
  auto runtime = Start();
  std::vector<std::shared_ptr<CollectingSink>> alone;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    alone.push_back(Submit(*runtime, Sampled(seed % 2 == 0 ? kJsonObjectGrammar : "", seed, 40)));
    ASSERT_TRUE(alone.back()->Wait());
  }
  std::vector<std::shared_ptr<CollectingSink>> together;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    together.push_back(Submit(*runtime, Sampled(seed % 2 == 0 ? kJsonObjectGrammar : "", seed, 40)));
  }
  for (size_t i = 0; i < together.size(); ++i) {
    ASSERT_TRUE(together[i]->Wait());
    EXPECT_EQ(together[i]->tokens, alone[i]->tokens) << "job " << i;
  }
}

TEST_F(RuntimeGrammarTest, ABadGrammarIsRefusedNamingTheField) {
  auto runtime = Start();
  const absl::Status refused =
      runtime->Submit(Sampled("root ::= \"unclosed", 1, 8), std::make_shared<CollectingSink>()).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.message(), "grammar: grammar line 1, column 19: a literal is not closed"))
      << refused;
  EXPECT_TRUE(RunGreedy(*runtime, "Once", 2)->status.ok()) << "still serving";
}

}  // namespace
}  // namespace octo::testing
