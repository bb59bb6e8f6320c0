#include "daemon/grammar/think_first.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace octo {

std::string TextUntilRules(absl::string_view tag, absl::string_view name, absl::string_view after, bool may_end) {
  // NAME-i has matched the tag's first i characters; a character that does
  // not continue it goes back to NAME-1 when it is the tag's first, else to
  // NAME-0.
  const absl::string_view first = tag.substr(0, 1);
  const std::string end = may_end ? " | \"\"" : "";
  std::string rules = absl::StrCat(name, "-0 ::= \"", first, "\" ", name, "-1 | [^", first, "] ", name, "-0", end, "\n");
  for (size_t i = 1; i < tag.size(); ++i) {
    const std::string next = i + 1 < tag.size() ? absl::StrCat(" ", name, "-", i + 1) : absl::StrCat(" ", after);
    absl::StrAppend(&rules, name, "-", i, " ::= \"", tag.substr(i, 1), "\"", next, " | \"", first, "\" ", name,
                    "-1 | [^", tag.substr(i, 1), first, "] ", name, "-0", end, "\n");
  }
  return rules;
}

namespace {

// The thought, before a placeholder rule `then` that becomes a grammar's
// root; parsed once.
const absl::StatusOr<Grammar>& Thought() {
  static const absl::StatusOr<Grammar>* const thought = new absl::StatusOr<Grammar>(Grammar::Parse(
      absl::StrCat("root ::= [ \\t\\n]{0,4} \"", kThinkOpen, "\" think-0 | then\nthen ::= \"x\"\n",
                   TextUntilRules(kThinkClose, "think", "[ \\t\\n]{0,8} then", false))));
  return *thought;
}

}  // namespace

Grammar ThinkFirst(Grammar grammar) {
  using Kind = GrammarElement::Kind;
  absl::StatusOr<Grammar> thought = Thought();  // a copy: its rules are renumbered into `grammar`
  if (!thought.ok()) return grammar;  // not reached: the text is fixed and parses
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
