#include "daemon/grammar/grammar.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "storage/utf8.h"

namespace octo {
namespace {

using Kind = GrammarElement::Kind;

bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '-' || c == '_'; }

GrammarElement Chars(uint32_t lo, uint32_t hi) {
  GrammarElement e;
  e.ranges.push_back({lo, hi});
  return e;
}

GrammarElement RuleRef(uint32_t rule) {
  GrammarElement e;
  e.kind = Kind::kRule;
  e.rule = rule;
  return e;
}

// A recursive-descent parser of GBNF; one per text.
class GbnfParser {
 public:
  explicit GbnfParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<Grammar> Run() {
    if (text_.size() > kMaxGrammarBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("the grammar is ", text_.size(), " bytes; at most ", kMaxGrammarBytes));
    }
    if (!IsValidUtf8(text_)) return absl::InvalidArgumentError("the grammar is not valid UTF-8");
    SkipSpace();
    while (pos_ < text_.size()) {
      const size_t at = pos_;
      absl::StatusOr<std::string> name = Name();
      if (!name.ok()) return name.status();
      SkipSpace();
      if (text_.substr(pos_, 3) != "::=") return Error(pos_, absl::StrCat("expected ::= after the rule name '", *name, "'"));
      pos_ += 3;
      absl::StatusOr<uint32_t> rule = RuleId(*name, at);
      if (!rule.ok()) return rule.status();
      if (defined_[*rule]) return Error(at, absl::StrCat("the rule '", *name, "' is defined twice"));
      defined_[*rule] = true;
      if (absl::Status body = Alternatives(*rule, 0); !body.ok()) return body;
      SkipSpace();
    }
    for (uint32_t r = 0; r < grammar_.rules.size(); ++r) {
      if (!defined_[r]) return Error(first_use_[r], absl::StrCat("the rule '", grammar_.rules[r].name, "' is not defined"));
    }
    const int root = grammar_.Find("root");
    if (root < 0) return absl::InvalidArgumentError("the grammar has no rule 'root' (where a match starts)");
    grammar_.root = static_cast<uint32_t>(root);
    if (absl::Status left = CheckLeftRecursion(); !left.ok()) return left;
    return std::move(grammar_);
  }

 private:
  absl::Status Error(size_t at, absl::string_view what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else if (!IsUtf8Continuation(static_cast<unsigned char>(text_[i]))) {
        ++column;
      }
    }
    return absl::InvalidArgumentError(absl::StrCat("grammar line ", line, ", column ", column, ": ", what));
  }

  // Spaces, tabs, newlines and # comments.
  void SkipSpace() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  absl::StatusOr<std::string> Name() {
    const size_t start = pos_;
    while (pos_ < text_.size() && IsNameChar(text_[pos_])) ++pos_;
    if (pos_ == start) return Error(start, "expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  // NAME ::= ahead: the current rule's body ends here.
  bool AtRuleStart() const {
    size_t p = pos_;
    while (p < text_.size() && IsNameChar(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  absl::StatusOr<uint32_t> NewRule(std::string name) {
    if (grammar_.rules.size() >= kMaxGrammarRules) {
      return absl::InvalidArgumentError(absl::StrCat("the grammar needs more than ", kMaxGrammarRules, " rules"));
    }
    grammar_.rules.push_back(GrammarRule{.name = std::move(name), .alternatives = {}});
    defined_.push_back(false);
    first_use_.push_back(pos_);
    return static_cast<uint32_t>(grammar_.rules.size() - 1);
  }

  absl::StatusOr<uint32_t> RuleId(const std::string& name, size_t at) {
    if (auto it = ids_.find(name); it != ids_.end()) return it->second;
    absl::StatusOr<uint32_t> id = NewRule(name);
    if (!id.ok()) return id.status();
    first_use_[*id] = at;
    ids_[name] = *id;
    return *id;
  }

  // A generated rule (a group or a repetition), named after `parent`.
  absl::StatusOr<uint32_t> Generated(uint32_t parent) {
    absl::StatusOr<uint32_t> id = NewRule(absl::StrCat(grammar_.rules[parent].name, "-", grammar_.rules.size()));
    if (id.ok()) defined_[*id] = true;
    return id;
  }

  // alternative ( "|" alternative )*, into rule `rule`.
  absl::Status Alternatives(uint32_t rule, int depth) {
    while (true) {
      GrammarAlternative alternative;
      if (absl::Status seq = Sequence(rule, alternative, depth); !seq.ok()) return seq;
      grammar_.rules[rule].alternatives.push_back(std::move(alternative));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == '|') {
        ++pos_;
        continue;
      }
      return absl::OkStatus();
    }
  }

  absl::Status Sequence(uint32_t rule, GrammarAlternative& out, int depth) {
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] == '|' || text_[pos_] == ')' || AtRuleStart()) return absl::OkStatus();
      std::vector<GrammarElement> atom;
      if (absl::Status parsed = Atom(rule, atom, depth); !parsed.ok()) return parsed;
      if (absl::Status repeated = Postfix(rule, atom, out); !repeated.ok()) return repeated;
    }
  }

  absl::Status Atom(uint32_t rule, std::vector<GrammarElement>& atom, int depth) {
    const char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      while (pos_ < text_.size() && text_[pos_] != '"') {
        absl::StatusOr<uint32_t> cp = CodePoint();
        if (!cp.ok()) return cp.status();
        atom.push_back(Chars(*cp, *cp));
      }
      if (pos_ >= text_.size()) return Error(pos_, "a literal is not closed with \"");
      ++pos_;
      return absl::OkStatus();
    }
    if (c == '[') return CharClass(atom);
    if (c == '.') {
      ++pos_;
      GrammarElement any;
      any.negated = true;  // outside no range: any code point
      atom.push_back(any);
      return absl::OkStatus();
    }
    if (c == '(') {
      if (depth >= kMaxGrammarNesting) return Error(pos_, absl::StrCat("groups nest deeper than ", kMaxGrammarNesting));
      ++pos_;
      absl::StatusOr<uint32_t> group = Generated(rule);
      if (!group.ok()) return group.status();
      if (absl::Status body = Alternatives(*group, depth + 1); !body.ok()) return body;
      if (pos_ >= text_.size() || text_[pos_] != ')') return Error(pos_, "a group is not closed with )");
      ++pos_;
      atom.push_back(RuleRef(*group));
      return absl::OkStatus();
    }
    if (IsNameChar(c)) {
      const size_t at = pos_;
      absl::StatusOr<std::string> name = Name();
      if (!name.ok()) return name.status();
      absl::StatusOr<uint32_t> id = RuleId(*name, at);
      if (!id.ok()) return id.status();
      atom.push_back(RuleRef(*id));
      return absl::OkStatus();
    }
    const size_t length = std::max<size_t>(1, Utf8SequenceLength(static_cast<unsigned char>(c)));
    return Error(pos_, absl::StrCat("unexpected '", text_.substr(pos_, length), "'"));
  }

  absl::Status CharClass(std::vector<GrammarElement>& atom) {
    const size_t start = pos_++;
    GrammarElement e;
    if (pos_ < text_.size() && text_[pos_] == '^') {
      e.negated = true;
      ++pos_;
    }
    while (pos_ < text_.size() && text_[pos_] != ']') {
      absl::StatusOr<uint32_t> lo = CodePoint();
      if (!lo.ok()) return lo.status();
      uint32_t hi = *lo;
      if (pos_ + 1 < text_.size() && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        absl::StatusOr<uint32_t> end = CodePoint();
        if (!end.ok()) return end.status();
        hi = *end;
        if (hi < *lo) return Error(pos_, "a character range ends below where it starts");
      }
      e.ranges.push_back({*lo, hi});
    }
    if (pos_ >= text_.size()) return Error(start, "a character class is not closed with ]");
    ++pos_;
    atom.push_back(std::move(e));
    return absl::OkStatus();
  }

  // One code point of a literal or class: a UTF-8 character or an escape.
  absl::StatusOr<uint32_t> CodePoint() {
    const size_t at = pos_;
    const unsigned char c = static_cast<unsigned char>(text_[pos_]);
    if (c == '\\') {
      if (pos_ + 1 >= text_.size()) return Error(at, "an escape at the end of the grammar");
      const char e = text_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case 'n': return uint32_t{'\n'};
        case 'r': return uint32_t{'\r'};
        case 't': return uint32_t{'\t'};
        case '\\': case '"': case '[': case ']': case '-': case '^': return static_cast<uint32_t>(e);
        case 'x': return Hex(2, at);
        case 'u': return Hex(4, at);
        case 'U': return Hex(8, at);
        default: return Error(at, absl::StrCat("unknown escape \\", std::string(1, e)));
      }
    }
    const size_t length = Utf8SequenceLength(c);  // the text is valid UTF-8
    uint32_t cp = length == 1 ? c : c & (0xFF >> (length + 1));
    for (size_t i = 1; i < length; ++i) cp = (cp << 6) | (static_cast<unsigned char>(text_[pos_ + i]) & 0x3F);
    pos_ += length;
    return cp;
  }

  absl::StatusOr<uint32_t> Hex(int digits, size_t at) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i, ++pos_) {
      if (pos_ >= text_.size() || !absl::ascii_isxdigit(text_[pos_])) {
        return Error(at, absl::StrCat("an escape needs ", digits, " hex digits"));
      }
      const char d = absl::ascii_tolower(text_[pos_]);
      value = value * 16 + static_cast<uint32_t>(d <= '9' ? d - '0' : d - 'a' + 10);
    }
    if (value > 0x10FFFF) return Error(at, "an escape above U+10FFFF");
    return value;
  }

  // * + ? {m} {m,} {m,n} after an atom, then the atom into `out`.
  absl::Status Postfix(uint32_t rule, const std::vector<GrammarElement>& atom, GrammarAlternative& out) {
    if (pos_ >= text_.size()) {
      out.insert(out.end(), atom.begin(), atom.end());
      return absl::OkStatus();
    }
    int min = 1, max = 1;  // max -1: unbounded
    const size_t at = pos_;
    switch (text_[pos_]) {
      case '*': min = 0, max = -1, ++pos_; break;
      case '+': min = 1, max = -1, ++pos_; break;
      case '?': min = 0, max = 1, ++pos_; break;
      case '{': {
        ++pos_;
        absl::StatusOr<int> m = Count(at);
        if (!m.ok()) return m.status();
        min = max = *m;
        if (pos_ < text_.size() && text_[pos_] == ',') {
          ++pos_;
          max = -1;
          if (pos_ < text_.size() && text_[pos_] != '}') {
            absl::StatusOr<int> n = Count(at);
            if (!n.ok()) return n.status();
            max = *n;
          }
        }
        if (pos_ >= text_.size() || text_[pos_] != '}') return Error(at, "a repetition is not closed with }");
        ++pos_;
        if (max >= 0 && max < min) return Error(at, "a repetition {m,n} needs m <= n");
        break;
      }
      default:
        out.insert(out.end(), atom.begin(), atom.end());
        return absl::OkStatus();
    }
    for (int i = 0; i < min; ++i) out.insert(out.end(), atom.begin(), atom.end());
    if (max < 0) {
      // x*: R ::= x R | ""
      absl::StatusOr<uint32_t> star = Generated(rule);
      if (!star.ok()) return star.status();
      GrammarAlternative again = atom;
      again.push_back(RuleRef(*star));
      grammar_.rules[*star].alternatives = {std::move(again), {}};
      out.push_back(RuleRef(*star));
    } else if (max > min) {
      // Up to max - min more: R1 ::= x | "", Rk ::= x Rk-1 | "".
      uint32_t inner = 0;
      for (int k = 1; k <= max - min; ++k) {
        absl::StatusOr<uint32_t> optional = Generated(rule);
        if (!optional.ok()) return optional.status();
        GrammarAlternative more = atom;
        if (k > 1) more.push_back(RuleRef(inner));
        grammar_.rules[*optional].alternatives = {std::move(more), {}};
        inner = *optional;
      }
      out.push_back(RuleRef(inner));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int> Count(size_t at) {
    SkipSpace();
    int value = 0;
    const size_t start = pos_;
    while (pos_ < text_.size() && absl::ascii_isdigit(text_[pos_])) {
      value = value * 10 + (text_[pos_++] - '0');
      if (value > kMaxGrammarRepeat) {
        return Error(at, absl::StrCat("a repetition count above ", kMaxGrammarRepeat));
      }
    }
    if (pos_ == start) return Error(at, "a repetition needs a count");
    SkipSpace();
    return value;
  }

  // A rule reaching itself before any code point is consumed would expand
  // forever: refused.
  absl::Status CheckLeftRecursion() const {
    const size_t n = grammar_.rules.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const GrammarAlternative& alt : grammar_.rules[r].alternatives) {
          const bool empty = std::all_of(alt.begin(), alt.end(), [&](const GrammarElement& e) {
            return e.kind == Kind::kRule && nullable[e.rule];
          });
          if (empty) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    // Rules each rule may start with.
    std::vector<std::vector<uint32_t>> starts(n);
    for (size_t r = 0; r < n; ++r) {
      for (const GrammarAlternative& alt : grammar_.rules[r].alternatives) {
        for (const GrammarElement& e : alt) {
          if (e.kind == Kind::kChars) break;
          starts[r].push_back(e.rule);
          if (!nullable[e.rule]) break;
        }
      }
    }
    std::vector<int> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<uint32_t, size_t>> path;
    for (size_t r0 = 0; r0 < n; ++r0) {
      if (color[r0] != 0) continue;
      path.push_back({static_cast<uint32_t>(r0), 0});
      color[r0] = 1;
      while (!path.empty()) {
        auto& [r, next] = path.back();
        if (next == starts[r].size()) {
          color[r] = 2;
          path.pop_back();
          continue;
        }
        const uint32_t s = starts[r][next++];
        if (color[s] == 1) {
          return absl::InvalidArgumentError(
              absl::StrCat("the rule '", grammar_.rules[s].name, "' is left-recursive: it can reach itself before "
                           "matching a character (a rule that starts with itself, or a repetition of something "
                           "that may match nothing)"));
        }
        if (color[s] == 0) {
          color[s] = 1;
          path.push_back({s, 0});
        }
      }
    }
    return absl::OkStatus();
  }

  absl::string_view text_;
  size_t pos_ = 0;
  Grammar grammar_;
  std::map<std::string, uint32_t> ids_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;
};

}  // namespace

bool GrammarElement::Matches(uint32_t code_point) const {
  bool inside = false;
  for (const auto& [lo, hi] : ranges) inside |= code_point >= lo && code_point <= hi;
  return inside != negated;
}

absl::StatusOr<Grammar> Grammar::Parse(absl::string_view text) {
  absl::StatusOr<Grammar> grammar = GbnfParser(text).Run();
  if (grammar.ok()) grammar->source = std::string(text);
  return grammar;
}

int Grammar::Find(absl::string_view name) const {
  for (size_t r = 0; r < rules.size(); ++r) {
    if (rules[r].name == name) return static_cast<int>(r);
  }
  return -1;
}

}  // namespace octo
