#include "daemon/tokenizer/pretokenizer.h"

#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/tokenizer/unicode.h"

namespace octo::tokenizer {
namespace {

// The piece of text a step splits: code points [begin, end) with their
// classes. Positions past `end` read as "no character", which is how a
// regex sees the end of its subject.
class Chunk {
 public:
  static constexpr uint32_t kNone = 0xFFFFFFFF;

  Chunk(const uint32_t* cpts, const uint8_t* classes, size_t begin, size_t end)
      : cpts_(cpts), classes_(classes), begin_(begin), end_(end) {}

  size_t begin() const { return begin_; }
  size_t end() const { return end_; }
  uint32_t At(size_t pos) const { return pos < end_ ? cpts_[pos] : kNone; }
  uint8_t ClassesAt(size_t pos) const { return pos < end_ ? classes_[pos] : 0; }
  bool Letter(size_t pos) const { return ClassesAt(pos) & kLetter; }
  bool Number(size_t pos) const { return ClassesAt(pos) & kNumber; }
  bool Space(size_t pos) const { return ClassesAt(pos) & kWhitespace; }
  // [^\s\p{L}\p{N}]: any character that is not whitespace, letter or number.
  bool OtherChar(size_t pos) const {
    return pos < end_ && !(classes_[pos] & (kWhitespace | kLetter | kNumber));
  }

 private:
  const uint32_t* cpts_;
  const uint8_t* classes_;
  size_t begin_, end_;
};

bool IsNewline(uint32_t cp) { return cp == '\r' || cp == '\n'; }

uint32_t AsciiLower(uint32_t cp) { return (cp >= 'A' && cp <= 'Z') ? cp + ('a' - 'A') : cp; }

// Length of the contraction ('s 't 'm 'd 're 've 'll) starting at `pos`, or 0.
size_t ContractionLength(const Chunk& p, size_t pos, bool ignore_case) {
  if (p.At(pos) != '\'') return 0;
  auto next = [&](size_t at) { return ignore_case ? AsciiLower(p.At(at)) : p.At(at); };
  const uint32_t a = next(pos + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  const uint32_t b = next(pos + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// The end of a run of whitespace starting at `pos` that the trailing
// alternatives take: \s+(?!\S) leaves the last space of a run that is
// followed by a non-space for the next word; \s+ takes a lone one.
size_t WhitespaceEnd(const Chunk& p, size_t pos) {
  size_t n = 0;
  while (p.Space(pos + n)) ++n;
  if (n > 1 && pos + n < p.end()) return pos + n - 1;
  return pos + (n > 0 ? n : 1);  // n == 0 cannot follow the earlier tests; keep progress anyway
}

size_t NextGpt2Word(const Chunk& p, size_t pos) {
  if (size_t n = ContractionLength(p, pos, /*ignore_case=*/false)) return pos + n;
  const size_t at = pos + (p.At(pos) == ' ' ? 1 : 0);  // the optional leading space
  size_t end = at;
  if (p.Letter(at)) {
    while (p.Letter(end)) ++end;
  } else if (p.Number(at)) {
    while (p.Number(end)) ++end;
  } else if (p.OtherChar(at)) {
    while (p.OtherChar(end)) ++end;
  }
  if (end > at) return end;
  return WhitespaceEnd(p, pos);
}

size_t NextLlama3Word(const Chunk& p, size_t pos, size_t max_digits) {
  if (size_t n = ContractionLength(p, pos, /*ignore_case=*/true)) return pos + n;
  const uint32_t c = p.At(pos);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (!IsNewline(c) && !p.Number(pos) && (p.Letter(pos) || p.Letter(pos + 1))) {
    size_t end = pos + 1;
    while (p.Letter(end)) ++end;
    return end;
  }
  // \p{N}{1,max_digits}
  if (p.Number(pos)) {
    size_t end = pos;
    while (end - pos < max_digits && p.Number(end)) ++end;
    return end;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  const size_t at = pos + (c == ' ' ? 1 : 0);
  if (p.OtherChar(at)) {
    size_t end = at;
    while (p.OtherChar(end)) ++end;
    while (IsNewline(p.At(end))) ++end;
    return end;
  }
  // \s*[\r\n]+ : through the last newline of the whitespace run.
  size_t last_newline_end = 0;
  for (size_t i = pos; p.Space(i); ++i) {
    if (IsNewline(p.At(i))) last_newline_end = i + 1;
  }
  if (last_newline_end > 0) return last_newline_end;
  return WhitespaceEnd(p, pos);
}

// Steps that are "split at every match": the matches of `match_end` (which
// returns the end of a match starting at a position, or that position when
// none starts there) and the text between them all become pieces.
template <typename MatchEnd>
void SplitAtMatches(const Chunk& p, MatchEnd match_end, std::vector<size_t>* out) {
  size_t gap_begin = p.begin();
  for (size_t pos = p.begin(); pos < p.end();) {
    const size_t end = match_end(pos);
    if (end == pos) {
      ++pos;
      continue;
    }
    if (pos > gap_begin) out->push_back(pos - gap_begin);
    out->push_back(end - pos);
    pos = gap_begin = end;
  }
  if (p.end() > gap_begin) out->push_back(p.end() - gap_begin);
}

bool InDefaultPunctuation(const Chunk& p, size_t pos, bool with_backtick) {
  const uint32_t c = p.At(pos);
  return (p.ClassesAt(pos) & kPunctuation) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' ||
         c == '^' || c == '~' || c == '|' || (with_backtick && c == '`');
}

void SplitChunk(SplitStep step, const Chunk& p, std::vector<size_t>* out) {
  auto run_of = [&](auto in_class) {
    return [&p, in_class](size_t pos) {
      size_t end = pos;
      while (end < p.end() && in_class(end)) ++end;
      return end;
    };
  };
  switch (step) {
    case SplitStep::kGpt2:
    case SplitStep::kLlama3:
    case SplitStep::kQwen2:
      // These regexes match everywhere (the trailing \s+ / single-character
      // fallbacks), so the words tile the piece.
      for (size_t pos = p.begin(); pos < p.end();) {
        const size_t end = step == SplitStep::kGpt2    ? NextGpt2Word(p, pos)
                           : step == SplitStep::kLlama3 ? NextLlama3Word(p, pos, 3)
                                                        : NextLlama3Word(p, pos, 1);
        out->push_back(end - pos);
        pos = end;
      }
      return;
    case SplitStep::kEachNumber:
      SplitAtMatches(p, [&p](size_t pos) { return p.Number(pos) ? pos + 1 : pos; }, out);
      return;
    case SplitStep::kNumberRuns:
      SplitAtMatches(p, run_of([&p](size_t pos) { return p.Number(pos); }), out);
      return;
    case SplitStep::kPunctuationRuns:
    case SplitStep::kPunctuationRunsWithBacktick: {
      const bool backtick = step == SplitStep::kPunctuationRunsWithBacktick;
      SplitAtMatches(p, run_of([&p, backtick](size_t pos) { return InDefaultPunctuation(p, pos, backtick); }),
                     out);
      return;
    }
    case SplitStep::kAsciiDigitTriples: {
      auto digit = [&p](size_t pos) { return p.At(pos) >= '0' && p.At(pos) <= '9'; };
      SplitAtMatches(
          p, [&](size_t pos) { return digit(pos) && digit(pos + 1) && digit(pos + 2) ? pos + 3 : pos; }, out);
      return;
    }
  }
}

std::vector<size_t> ApplyStep(SplitStep step, std::span<const uint32_t> cpts, std::span<const uint8_t> classes,
                              std::span<const size_t> pieces) {
  std::vector<size_t> out;
  out.reserve(pieces.size());
  size_t begin = 0;
  for (size_t length : pieces) {
    SplitChunk(step, Chunk(cpts.data(), classes.data(), begin, begin + length), &out);
    begin += length;
  }
  return out;
}

std::vector<uint8_t> ClassesOf(std::span<const uint32_t> cpts) {
  std::vector<uint8_t> classes(cpts.size());
  for (size_t i = 0; i < cpts.size(); ++i) classes[i] = UnicodeClassesOf(cpts[i]);
  return classes;
}

struct Family {
  std::initializer_list<absl::string_view> names;
  std::initializer_list<SplitStep> steps;
  bool ignore_merges;
  bool add_bos_default;
};

// llama.cpp's tokenizer.ggml.pre -> regex list table, for the names above.
const Family kFamilies[] = {
    {{"gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "exaone4"}, {SplitStep::kGpt2}, false, false},
    {{"default", ""},
     {SplitStep::kPunctuationRuns, SplitStep::kGpt2, SplitStep::kNumberRuns, SplitStep::kAsciiDigitTriples},
     false,
     false},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "lfm2"},
     {SplitStep::kLlama3},
     true,
     true},
    {{"dbrx", "smaug-bpe"}, {SplitStep::kLlama3}, false, false},
    {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"}, {SplitStep::kQwen2}, false, false},
    {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"},
     {SplitStep::kEachNumber, SplitStep::kGpt2},
     false,
     false},
    {{"falcon"},
     {SplitStep::kPunctuationRunsWithBacktick, SplitStep::kGpt2, SplitStep::kAsciiDigitTriples},
     false,
     false},
};

}  // namespace

absl::StatusOr<PreTokenizer> FindPreTokenizer(absl::string_view name) {
  for (const Family& family : kFamilies) {
    for (absl::string_view candidate : family.names) {
      if (candidate != name) continue;
      return PreTokenizer{std::string(name), std::vector<SplitStep>(family.steps), family.ignore_merges,
                          family.add_bos_default};
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("tokenizer.ggml.pre: unsupported pre-tokenizer '", name, "'"));
}

std::vector<size_t> ApplySplitStep(SplitStep step, std::span<const uint32_t> cpts, std::span<const size_t> pieces) {
  const std::vector<uint8_t> classes = ClassesOf(cpts);
  return ApplyStep(step, cpts, classes, pieces);
}

std::vector<std::string> PreTokenize(const PreTokenizer& pre, absl::string_view text) {
  const std::vector<uint32_t> cpts = DecodeUtf8All(text);
  const std::vector<uint8_t> classes = ClassesOf(cpts);
  std::vector<size_t> pieces;
  if (!cpts.empty()) pieces.push_back(cpts.size());
  for (SplitStep step : pre.steps) pieces = ApplyStep(step, cpts, classes, pieces);

  std::vector<std::string> words;
  words.reserve(pieces.size());
  size_t begin = 0;
  for (size_t length : pieces) {
    std::string& word = words.emplace_back();
    for (size_t i = begin; i < begin + length; ++i) AppendUtf8(cpts[i], &word);
    begin += length;
  }
  return words;
}

}  // namespace octo::tokenizer
