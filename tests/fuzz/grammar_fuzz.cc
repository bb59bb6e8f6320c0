// libFuzzer target for grammars: hostile GBNF text (llama-server's `grammar`
// field takes it as sent), then hostile output fed to what parsed.
//
// The input is the grammar text, a NUL, then bytes cut into "tokens" at
// every 0x01. A grammar text that starts with '{' is a JSON Schema instead,
// converted first (json_schema.h): what the converter returns must parse. Invariants, from grammar.h and grammar_matcher.h: a text that
// parses has a root rule and only defined rules; Allows agrees with Accept,
// and a refused token leaves the state as it was; the mask over the tokens
// is exactly what Allows says; rolling back every accepted token returns to
// the start.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "daemon/grammar/grammar_matcher.h"
#include "daemon/grammar/json_schema.h"

namespace {

void Check(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "grammar_fuzz: invariant broken: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  std::string text = input.substr(0, nul);
  if (!text.empty() && text[0] == '{') {
    const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) return 0;
    absl::StatusOr<std::string> converted = octo::JsonSchemaToGrammar(schema);
    if (!converted.ok()) return 0;
    text = *std::move(converted);
    Check(octo::Grammar::Parse(text).ok(), "a converted schema's grammar parses");
  }
  absl::StatusOr<octo::Grammar> grammar = octo::Grammar::Parse(text);
  if (!grammar.ok() || nul == std::string::npos) return 0;
  Check(grammar->root < grammar->rules.size() && grammar->rules[grammar->root].name == "root", "the root is 'root'");
  auto shared = std::make_shared<const octo::Grammar>(*std::move(grammar));
  std::vector<std::string> tokens = absl::StrSplit(input.substr(nul + 1), '\x01');
  if (tokens.size() > 64) tokens.resize(64);
  octo::GrammarMatcher matcher(shared);
  const bool could_end = matcher.CanEnd();
  octo::TokenTrie trie(tokens);
  std::vector<uint8_t> allowed;
  int accepted = 0;
  for (const std::string& token : tokens) {
    matcher.FillMask(trie, allowed);
    for (size_t id = 0; id < tokens.size(); ++id) {
      Check((allowed[id] == 1) == (!tokens[id].empty() && matcher.Allows(tokens[id])), "the mask is what Allows says");
    }
    const bool allows = matcher.Allows(token);
    const bool ended = matcher.CanEnd();
    const bool took = matcher.Accept(token);
    Check(took == allows, "Accept agrees with Allows");
    if (took) {
      ++accepted;
    } else {
      Check(matcher.CanEnd() == ended, "a refused token changes nothing");
    }
  }
  if (accepted <= 64) {
    Check(matcher.Rollback(accepted).ok(), "every accepted token rolls back");
    Check(matcher.CanEnd() == could_end && matcher.accepted() == 0, "rolled back to the start");
  }
  return 0;
}
