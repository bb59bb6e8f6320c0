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
#include "daemon/grammar/json_schema.h"
#include "storage/decompose.h"
#include "tests/daemon/grammar/schema_validator.h"
#include "tests/shared_data.h"
#include "tests/temp_dir.h"
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

// Schemas a client might send at once, each with its own grammar.
const char* const kSchemas[] = {
    R"j({"type":"object","properties":{"name":{"type":"string","maxLength":10},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name","age"],"additionalProperties":false})j",
    R"j({"type":"array","items":{"enum":["red","green","blue"]},"minItems":1,"maxItems":4})j",
    R"j({"type":"object","properties":{"ok":{"type":"boolean"},"code":{"type":"string","pattern":"^[A-Z]{2}[0-9]{2}$"}},"required":["ok","code"]})j",
    R"j({"type":"integer","minimum":-50,"maximum":50})j",
    R"j({"type":"object","properties":{"day":{"type":"string","format":"date"},"tags":{"type":"array","items":{"type":"string","maxLength":5},"maxItems":2}},"required":["day","tags"],"additionalProperties":false})j",
    R"j({"anyOf":[{"type":"null"},{"type":"object","properties":{"x":{"type":"integer","minimum":0,"maximum":9}},"required":["x"],"additionalProperties":false}]})j",
    R"j({"$defs":{"N":{"type":"object","properties":{"v":{"type":"integer","minimum":0,"maximum":99},"kids":{"type":"array","items":{"$ref":"#/$defs/N"},"maxItems":1}},"required":["v","kids"],"additionalProperties":false}},"$ref":"#/$defs/N"})j",
    R"j({"type":"array","prefixItems":[{"type":"string","maxLength":4},{"type":"integer","minimum":1,"maximum":3}],"items":false,"minItems":2})j",
};

// Eight sessions at once, each held to a different schema: every reply
// that ends parses and validates, and each is what it is alone.
TEST_F(RuntimeGrammarTest, EightConcurrentSchemasEachValidate) {
  auto runtime = Start();
  std::vector<std::string> grammars;
  for (const char* schema : kSchemas) {
    absl::StatusOr<std::string> grammar = JsonSchemaToGrammar(nlohmann::ordered_json::parse(schema));
    ASSERT_TRUE(grammar.ok()) << schema << ": " << grammar.status();
    grammars.push_back(*grammar);
  }
  std::vector<std::shared_ptr<CollectingSink>> alone, together;
  for (size_t i = 0; i < grammars.size(); ++i) {
    alone.push_back(Submit(*runtime, Sampled(grammars[i], 10 + i, 300)));
    ASSERT_TRUE(alone.back()->Wait());
  }
  for (size_t i = 0; i < grammars.size(); ++i) together.push_back(Submit(*runtime, Sampled(grammars[i], 10 + i, 300)));
  int whole = 0;
  for (size_t i = 0; i < grammars.size(); ++i) {
    ASSERT_TRUE(together[i]->Wait());
    ASSERT_TRUE(together[i]->status.ok()) << together[i]->status;
    EXPECT_EQ(together[i]->tokens, alone[i]->tokens) << kSchemas[i];
    if (together[i]->finish_reason != "stop") continue;
    ++whole;
    const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(kSchemas[i]);
    const nlohmann::ordered_json value = nlohmann::ordered_json::parse(together[i]->text, nullptr, false);
    ASSERT_FALSE(value.is_discarded()) << kSchemas[i] << "\ngave " << together[i]->text;
    EXPECT_EQ(SchemaValidator(schema).Check(value), "") << kSchemas[i] << "\ngave " << together[i]->text;
  }
  EXPECT_GE(whole, 6) << "most replies end within 300 tokens";
}

// A trained model (../shared's stories260K) held to a schema, 20 seeds:
// every reply that ends validates.
TEST(RuntimeGrammarSharedTest, ATrainedModelsReplyValidatesForEverySeed) {
  OCTO_REQUIRE_SHARED("models/stories260K.gguf");
  TempDir root;
  ASSERT_TRUE(Decompose(SharedPath("models/stories260K.gguf"), root.Path("stories"), DecomposeOptions{}).ok());
  RuntimeOptions options = TestRuntimeOptions(root.path().string());
  options.model = "stories";
  auto runtime = RuntimeImpl::Create(options, FileLayerStream::Factory());
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(kSchemas[0]);
  const std::string grammar = *JsonSchemaToGrammar(schema);
  int whole = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    GenerateJob job = GreedyJob("Once upon a time, there was a girl named", 200);
    job.sampling.temperature = 0.8;
    job.sampling.seed = seed;
    job.grammar = grammar;
    std::shared_ptr<CollectingSink> sink = Submit(**runtime, job);
    ASSERT_TRUE(sink->Wait());
    ASSERT_TRUE(sink->status.ok()) << "seed " << seed << ": " << sink->status;
    if (sink->finish_reason != "stop") continue;
    ++whole;
    const nlohmann::ordered_json value = nlohmann::ordered_json::parse(sink->text, nullptr, false);
    ASSERT_FALSE(value.is_discarded()) << "seed " << seed << ": " << sink->text;
    EXPECT_EQ(SchemaValidator(schema).Check(value), "") << "seed " << seed << ": " << sink->text;
  }
  EXPECT_GE(whole, 10) << "most replies end within 200 tokens";
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
