#include "daemon/grammar/think_first.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace octo {
namespace {

// Rules think-0 .. think-N for "any text, then the first kThinkClose":
// think-i has matched the tag's first i characters. The tag's first
// character appears in it only there, so a mismatch falls back to think-1
// on that character and to think-0 on any other.
std::string ThoughtRules() {
  const absl::string_view tag = kThinkClose;
  std::string rules = absl::StrCat("think-0 ::= \"", tag.substr(0, 1), "\" think-1 | [^", tag.substr(0, 1),
                                   "] think-0\n");
  for (size_t i = 1; i < tag.size(); ++i) {
    const std::string next = i + 1 < tag.size() ? absl::StrCat(" think-", i + 1) : "";
    absl::StrAppend(&rules, "think-", i, " ::= \"", tag.substr(i, 1), "\"", next, " | \"", tag.substr(0, 1),
                    "\" think-1 | [^", tag.substr(i, 1), tag.substr(0, 1), "] think-0\n");
  }
  return rules;
}

}  // namespace

Grammar ThinkFirst(Grammar grammar) {
  using Kind = GrammarElement::Kind;
  // The thought, before a placeholder rule that becomes `grammar`'s root.
  const std::string text = absl::StrCat("root ::= [ \\t\\n]{0,4} \"", kThinkOpen,
                                        "\" think-0 [ \\t\\n]{0,8} then | then\nthen ::= \"x\"\n", ThoughtRules());
  absl::StatusOr<Grammar> thought = Grammar::Parse(text);
  if (!thought.ok()) return grammar;  // not reached: the text above is fixed and parses
  const uint32_t offset = static_cast<uint32_t>(grammar.rules.size());
  const int then = thought->Find("then");
  for (GrammarRule& rule : thought->rules) {
    for (GrammarAlternative& alternative : rule.alternatives) {
      for (GrammarElement& element : alternative) {
        if (element.kind != Kind::kRule) continue;
        element.rule = static_cast<int>(element.rule) == then ? grammar.root : element.rule + offset;
      }
    }
    rule.name = absl::StrCat("thought-", rule.name);
    grammar.rules.push_back(std::move(rule));
  }
  grammar.root = thought->root + offset;
  if (!grammar.source.empty()) grammar.source = absl::StrCat("# after a thought\n", grammar.source);
  return grammar;
}

}  // namespace octo
