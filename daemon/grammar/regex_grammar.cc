#include "daemon/grammar/regex_grammar.h"

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "storage/status_macros.h"
#include "storage/utf8.h"

namespace octo {
namespace {

using Range = std::pair<uint32_t, uint32_t>;

constexpr int kMaxPatternNesting = 32;
constexpr int kMaxPatternRepeat = 1000;

// A code point as a GBNF class member.
std::string ClassChar(uint32_t cp) {
  return cp <= 0xFFFF ? absl::StrFormat("\\u%04X", cp) : absl::StrFormat("\\U%08X", cp);
}

// `ranges` less [lo, hi].
std::vector<Range> Without(const std::vector<Range>& ranges, uint32_t lo, uint32_t hi) {
  std::vector<Range> out;
  for (const auto& [a, b] : ranges) {
    if (b < lo || a > hi) {
      out.push_back({a, b});
      continue;
    }
    if (a < lo) out.push_back({a, lo - 1});
    if (b > hi) out.push_back({hi + 1, b});
  }
  return out;
}

// The characters of a set (its ranges, or all but them), as they appear
// inside a JSON string: raw, but a quote as \" and a backslash as \\, and
// of the control characters only \n, \t and \r (written escaped).
std::string JsonChars(const std::vector<Range>& ranges, bool negated) {
  auto in_set = [&](uint32_t cp) {
    bool in = false;
    for (const auto& [a, b] : ranges) in |= cp >= a && cp <= b;
    return in != negated;
  };
  std::vector<std::string> alternatives;
  if (negated) {
    std::string cls = "[^";
    for (const auto& [a, b] : ranges) absl::StrAppend(&cls, ClassChar(a), a == b ? "" : "-" + ClassChar(b));
    absl::StrAppend(&cls, ClassChar('"'), ClassChar('\\'), ClassChar(0), "-", ClassChar(0x1F), "]");
    alternatives.push_back(cls);
  } else {
    std::vector<Range> raw = Without(Without(Without(ranges, 0, 0x1F), '"', '"'), '\\', '\\');
    if (!raw.empty()) {
      std::string cls = "[";
      for (const auto& [a, b] : raw) absl::StrAppend(&cls, ClassChar(a), a == b ? "" : "-" + ClassChar(b));
      alternatives.push_back(cls + "]");
    }
  }
  if (in_set('"')) alternatives.push_back(R"("\\\"")");
  if (in_set('\\')) alternatives.push_back(R"("\\\\")");
  for (const auto& [cp, escape] : {std::pair<uint32_t, const char*>{'\n', R"("\\n")"}, {'\t', R"("\\t")"}, {'\r', R"("\\r")"}}) {
    if (in_set(cp)) alternatives.push_back(escape);
  }
  if (alternatives.empty()) return "";
  return alternatives.size() == 1 ? alternatives[0] : absl::StrCat("( ", absl::StrJoin(alternatives, " | "), " )");
}

const std::vector<Range> kDigits = {{'0', '9'}};
const std::vector<Range> kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const std::vector<Range> kSpace = {{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x2028, 0x2029}, {0xFEFF, 0xFEFF}};

class RegexParser {
 public:
  explicit RegexParser(absl::string_view pattern) : p_(pattern) {}

  absl::StatusOr<std::string> Run() {
    OCTO_ASSIGN_OR_RETURN(std::string body, Alternation(0));
    if (pos_ < p_.size()) return Error("an unmatched )");
    return body;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("pattern at ", pos_, ": ", what));
  }
  bool At(char c) const { return pos_ < p_.size() && p_[pos_] == c; }

  absl::StatusOr<std::string> Alternation(int depth) {
    std::vector<std::string> branches;
    while (true) {
      OCTO_ASSIGN_OR_RETURN(std::string branch, Concat(depth));
      branches.push_back(std::move(branch));
      if (!At('|')) break;
      ++pos_;
    }
    return branches.size() == 1 ? branches[0] : absl::StrCat("( ", absl::StrJoin(branches, " | "), " )");
  }

  absl::StatusOr<std::string> Concat(int depth) {
    std::vector<std::string> items;
    while (pos_ < p_.size() && !At('|') && !At(')')) {
      OCTO_ASSIGN_OR_RETURN(std::string atom, Atom(depth));
      OCTO_ASSIGN_OR_RETURN(std::string item, Quantified(std::move(atom)));
      if (!item.empty()) items.push_back(std::move(item));
    }
    return items.empty() ? std::string("\"\"") : absl::StrJoin(items, " ");
  }

  absl::StatusOr<std::string> Quantified(std::string atom) {
    if (pos_ >= p_.size()) return atom;
    std::string suffix;
    const char c = p_[pos_];
    if (c == '*' || c == '+' || c == '?') {
      suffix = std::string(1, c);
      ++pos_;
    } else if (c == '{') {
      const size_t start = pos_++;
      int m = 0, n = -1;
      bool any = false;
      while (pos_ < p_.size() && absl::ascii_isdigit(p_[pos_])) {
        m = m * 10 + (p_[pos_++] - '0');
        any = true;
        if (m > kMaxPatternRepeat) return Error(absl::StrCat("a repetition above ", kMaxPatternRepeat));
      }
      if (!any) {  // not a quantifier: a literal "{", as ECMAScript reads it
        pos_ = start;
        return atom;
      }
      n = m;
      if (At(',')) {
        ++pos_;
        n = -1;
        if (pos_ < p_.size() && absl::ascii_isdigit(p_[pos_])) {
          n = 0;
          while (pos_ < p_.size() && absl::ascii_isdigit(p_[pos_])) {
            n = n * 10 + (p_[pos_++] - '0');
            if (n > kMaxPatternRepeat) return Error(absl::StrCat("a repetition above ", kMaxPatternRepeat));
          }
        }
      }
      if (!At('}')) return Error("a repetition {m,n} is not closed");
      ++pos_;
      if (n >= 0 && n < m) return Error("a repetition {m,n} needs m <= n");
      suffix = n < 0 ? absl::StrCat("{", m, ",}") : absl::StrCat("{", m, ",", n, "}");
    } else {
      return atom;
    }
    if (At('?')) ++pos_;  // lazy: the same strings
    if (atom.empty()) return std::string();
    return absl::StrCat("( ", atom, " )", suffix);
  }

  absl::StatusOr<std::string> Set(const std::vector<Range>& ranges, bool negated) {
    std::string chars = JsonChars(ranges, negated);
    if (chars.empty()) return Error("a class with no character a JSON string can hold");
    return chars;
  }

  absl::StatusOr<uint32_t> CodePoint() {
    const unsigned char lead = static_cast<unsigned char>(p_[pos_]);
    const size_t length = Utf8SequenceLength(lead);
    if (length == 0 || pos_ + length > p_.size()) return Error("not valid UTF-8");
    uint32_t cp = length == 1 ? lead : lead & (0xFF >> (length + 1));
    for (size_t i = 1; i < length; ++i) cp = (cp << 6) | (static_cast<unsigned char>(p_[pos_ + i]) & 0x3F);
    pos_ += length;
    return cp;
  }

  absl::StatusOr<uint32_t> Hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i, ++pos_) {
      if (pos_ >= p_.size() || !absl::ascii_isxdigit(p_[pos_])) return Error("an escape needs hex digits");
      const char d = absl::ascii_tolower(p_[pos_]);
      v = v * 16 + static_cast<uint32_t>(d <= '9' ? d - '0' : d - 'a' + 10);
    }
    return v;
  }

  // After a backslash: a class (*set, *negated) or one code point.
  absl::StatusOr<uint32_t> Escape(std::vector<Range>* set, bool* negated) {
    if (pos_ >= p_.size()) return Error("a backslash at the end");
    const char e = p_[pos_++];
    switch (e) {
      case 'd': *set = kDigits; *negated = false; return 0u;
      case 'D': *set = kDigits; *negated = true; return 0u;
      case 'w': *set = kWord; *negated = false; return 0u;
      case 'W': *set = kWord; *negated = true; return 0u;
      case 's': *set = kSpace; *negated = false; return 0u;
      case 'S': *set = kSpace; *negated = true; return 0u;
      case 'n': return uint32_t{'\n'};
      case 't': return uint32_t{'\t'};
      case 'r': return uint32_t{'\r'};
      case 'f': return uint32_t{'\f'};
      case 'v': return uint32_t{'\v'};
      case '0': return uint32_t{0};
      case 'x': return Hex(2);
      case 'u': return Hex(4);
      case 'b': case 'B': return Error("word boundaries (\\b) are not supported");
      default:
        if (e >= '1' && e <= '9') return Error("back-references are not supported");
        if (absl::ascii_isalpha(e)) return Error(absl::StrCat("the escape \\", std::string(1, e), " is not supported"));
        return static_cast<uint32_t>(static_cast<unsigned char>(e));  // \. \* \\ ...
    }
  }

  absl::StatusOr<std::string> Atom(int depth) {
    const char c = p_[pos_];
    if (c == '(') {
      if (depth >= kMaxPatternNesting) return Error(absl::StrCat("groups nest deeper than ", kMaxPatternNesting));
      ++pos_;
      if (At('?')) {
        if (pos_ + 1 < p_.size() && p_[pos_ + 1] == ':') {
          pos_ += 2;
        } else {
          return Error("lookaround and named groups are not supported");
        }
      }
      OCTO_ASSIGN_OR_RETURN(std::string inner, Alternation(depth + 1));
      if (!At(')')) return Error("a group is not closed with )");
      ++pos_;
      return absl::StrCat("( ", inner, " )");
    }
    if (c == '[') return Class();
    if (c == '.') {
      ++pos_;
      return Set({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, /*negated=*/true);
    }
    if (c == '^' || c == '$') return Error("anchors are supported at the pattern's two ends only");
    if (c == '*' || c == '+' || c == '?') return Error("a quantifier with nothing to repeat");
    if (c == '\\') {
      ++pos_;
      std::vector<Range> set;
      bool negated = false;
      OCTO_ASSIGN_OR_RETURN(const uint32_t cp, Escape(&set, &negated));
      if (!set.empty()) return Set(set, negated);
      return Set({{cp, cp}}, false);
    }
    OCTO_ASSIGN_OR_RETURN(const uint32_t cp, CodePoint());
    return Set({{cp, cp}}, false);
  }

  absl::StatusOr<std::string> Class() {
    ++pos_;  // [
    bool negated = false;
    if (At('^')) {
      negated = true;
      ++pos_;
    }
    std::vector<Range> ranges;
    bool first = true;
    while (pos_ < p_.size() && (!At(']') || first)) {
      first = false;
      std::vector<Range> set;
      bool set_negated = false;
      uint32_t lo = 0;
      if (At('\\')) {
        ++pos_;
        OCTO_ASSIGN_OR_RETURN(lo, Escape(&set, &set_negated));
        if (!set.empty()) {
          if (set_negated) return Error("a negated class escape (\\D, \\W, \\S) inside [ ] is not supported");
          ranges.insert(ranges.end(), set.begin(), set.end());
          continue;
        }
      } else {
        OCTO_ASSIGN_OR_RETURN(lo, CodePoint());
      }
      uint32_t hi = lo;
      if (At('-') && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;
        if (At('\\')) {
          ++pos_;
          OCTO_ASSIGN_OR_RETURN(hi, Escape(&set, &set_negated));
          if (!set.empty()) return Error("a range cannot end in a class escape");
        } else {
          OCTO_ASSIGN_OR_RETURN(hi, CodePoint());
        }
        if (hi < lo) return Error("a range ends below where it starts");
      }
      ranges.push_back({lo, hi});
    }
    if (!At(']')) return Error("a class is not closed with ]");
    ++pos_;
    return Set(ranges, negated);
  }

  absl::string_view p_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<std::string> JsonStringPattern(absl::string_view pattern) {
  if (pattern.size() > kMaxPatternBytes) {
    return absl::InvalidArgumentError(absl::StrCat("pattern is ", pattern.size(), " bytes; at most ", kMaxPatternBytes));
  }
  const bool from_start = !pattern.empty() && pattern.front() == '^';
  if (from_start) pattern.remove_prefix(1);
  // A $ at the end, not escaped (an even run of backslashes before it).
  size_t backslashes = 0;
  while (pattern.size() >= 2 + backslashes && pattern[pattern.size() - 2 - backslashes] == '\\') ++backslashes;
  const bool to_end = !pattern.empty() && pattern.back() == '$' && backslashes % 2 == 0;
  if (to_end) pattern.remove_suffix(1);
  OCTO_ASSIGN_OR_RETURN(const std::string body, RegexParser(pattern).Run());
  // Unanchored ends: anything before or after the match.
  return absl::StrCat(from_start ? "" : "char* ", "( ", body, " )", to_end ? "" : " char*");
}

}  // namespace octo
