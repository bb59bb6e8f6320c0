#include "daemon/grammar/grammar_matcher.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/utf8.h"

namespace octo {
namespace {

using Kind = GrammarElement::Kind;
using Stack = GrammarMatcher::Stack;
using State = GrammarMatcher::State;

// Ways to continue kept at once; a grammar ambiguous past this keeps the
// first ones (no grammar the converters write comes near it).
constexpr size_t kMaxStacks = 4096;
// Expansion steps one code point may take (an ambiguous grammar's bound).
constexpr size_t kMaxExpansionSteps = 1 << 16;
// Accepted tokens a Rollback can undo (speculative drafts are far shorter).
constexpr size_t kMaxRollback = 64;
// Masks a matcher keeps for the states it met last.
constexpr size_t kCachedMasks = 8;

// Appends to `out` every stack `start` expands to: one with a character
// set on top, or an empty one (a whole match). Iterative: a chain of rules
// is data, not C++ stack depth.
void Expand(const Grammar& g, Stack start, std::vector<Stack>& out) {
  std::vector<Stack> work;
  work.push_back(std::move(start));
  size_t steps = 0;
  while (!work.empty() && ++steps <= kMaxExpansionSteps) {
    Stack stack = std::move(work.back());
    work.pop_back();
    bool expanded = false;
    while (!stack.empty()) {
      GrammarMatcher::Position& top = stack.back();
      const GrammarAlternative& alt = g.rules[top.rule].alternatives[top.alternative];
      if (top.element == alt.size()) {  // this alternative matched: back to its caller
        stack.pop_back();
        continue;
      }
      const GrammarElement& e = alt[top.element];
      if (e.kind == Kind::kChars) break;
      // A rule: its caller goes on after it (popped when nothing follows,
      // so a right-recursive repetition does not deepen the stack).
      ++top.element;
      if (top.element == alt.size()) stack.pop_back();
      const GrammarRule& rule = g.rules[e.rule];
      for (size_t a = rule.alternatives.size(); a-- > 0;) {
        Stack next = stack;
        next.push_back({e.rule, static_cast<uint32_t>(a), 0});
        work.push_back(std::move(next));
      }
      expanded = true;
      break;
    }
    if (!expanded && out.size() < kMaxStacks) out.push_back(std::move(stack));
  }
}

void Normalize(std::vector<Stack>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

const GrammarElement& Top(const Grammar& g, const Stack& s) {
  const GrammarMatcher::Position& p = s.back();
  return g.rules[p.rule].alternatives[p.alternative][p.element];
}

// Some code point in [lo, hi] could match `e`.
bool MayMatch(const GrammarElement& e, uint32_t lo, uint32_t hi) {
  for (const auto& [a, b] : e.ranges) {
    if (!e.negated && a <= hi && b >= lo) return true;
    if (e.negated && a <= lo && b >= hi) return false;  // all of [lo, hi] is excluded
  }
  return e.negated;
}

// The code point `cp` into every stack that takes it.
bool Advance(const Grammar& g, State& state, uint32_t cp) {
  std::vector<Stack> next;
  for (const Stack& s : state.stacks) {
    if (s.empty() || !Top(g, s).Matches(cp)) continue;
    Stack moved = s;
    ++moved.back().element;
    Expand(g, std::move(moved), next);
  }
  Normalize(next);
  state.stacks = std::move(next);
  return !state.stacks.empty();
}

// The least code point a well-formed character of `length` bytes holds.
uint32_t Shortest(uint8_t length) { return length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000; }

// A character begun: some stack could take a code point it may become
// (a well-formed one: no overlong form, nothing past U+10FFFF).
bool MayContinue(const Grammar& g, const State& state) {
  const uint32_t prefix = state.code_point << (6 * state.pending);
  const uint32_t lo = std::max(prefix, Shortest(state.length));
  const uint32_t hi = std::min<uint32_t>(prefix | ((1u << (6 * state.pending)) - 1), 0x10FFFF);
  if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return false;  // nothing, or only surrogates
  return std::any_of(state.stacks.begin(), state.stacks.end(),
                     [&](const Stack& s) { return !s.empty() && MayMatch(Top(g, s), lo, hi); });
}

}  // namespace

TokenTrie::TokenTrie(const std::vector<std::string>& bytes) : nodes_(1), vocab_size_(bytes.size()) {
  for (size_t id = 0; id < bytes.size(); ++id) {
    if (bytes[id].empty()) continue;
    uint32_t at = 0;
    for (const char c : bytes[id]) {
      const uint8_t b = static_cast<uint8_t>(c);
      auto& children = nodes_[at].children;
      auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(b, uint32_t{0}),
                                 [](const auto& x, const auto& y) { return x.first < y.first; });
      if (it == children.end() || it->first != b) {
        const uint32_t child = static_cast<uint32_t>(nodes_.size());
        children.insert(it, {b, child});
        nodes_.emplace_back();  // invalidates `children`: not used after
        at = child;
      } else {
        at = it->second;
      }
    }
    nodes_[at].tokens.push_back(static_cast<int32_t>(id));
  }
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  State start;
  const GrammarRule& root = grammar_->rules[grammar_->root];
  for (uint32_t a = 0; a < root.alternatives.size(); ++a) {
    Expand(*grammar_, Stack{{grammar_->root, a, 0}}, start.stacks);
  }
  Normalize(start.stacks);
  history_.push_back(std::move(start));
}

bool GrammarMatcher::Step(State& state, uint8_t byte) const {
  if (state.pending == 0) {
    if (byte < 0x80) return Advance(*grammar_, state, byte);
    const size_t length = Utf8SequenceLength(byte);
    if (length < 2) return false;
    state.code_point = byte & (0xFFu >> (length + 1));
    state.pending = static_cast<uint8_t>(length - 1);
    state.length = static_cast<uint8_t>(length);
    return MayContinue(*grammar_, state);
  }
  if (!IsUtf8Continuation(byte)) return false;
  state.code_point = (state.code_point << 6) | (byte & 0x3F);
  if (--state.pending > 0) return MayContinue(*grammar_, state);
  // Well-formed only: an overlong form ("\xE0\x80\xB2" for "2") or a
  // surrogate is no character, whatever code point it spells.
  const uint32_t cp = state.code_point;
  if (cp < Shortest(state.length) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  return Advance(*grammar_, state, cp);
}

std::optional<GrammarMatcher::State> GrammarMatcher::After(absl::string_view bytes) const {
  State next = history_.back();
  for (const char c : bytes) {
    if (!Step(next, static_cast<uint8_t>(c))) return std::nullopt;
  }
  return next;
}

bool GrammarMatcher::Accept(absl::string_view bytes) {
  std::optional<State> next = After(bytes);
  if (!next.has_value()) return false;
  history_.push_back(*std::move(next));
  ++accepted_;
  if (history_.size() > kMaxRollback + 1) history_.pop_front();
  return true;
}

bool GrammarMatcher::Allows(absl::string_view bytes) const { return After(bytes).has_value(); }

bool GrammarMatcher::CanEnd() const {
  const State& now = history_.back();
  return now.pending == 0 && !now.stacks.empty() && now.stacks.front().empty();  // sorted: an empty stack is first
}

absl::Status GrammarMatcher::Rollback(int n) {
  if (n < 0 || static_cast<size_t>(n) >= history_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot roll the grammar back ", n, " tokens; ",
                                                   history_.size() - 1, " can be"));
  }
  history_.resize(history_.size() - n);
  accepted_ -= n;
  return absl::OkStatus();
}

// One mask's walk: the states met so far, each once, and the byte steps
// between them, so a state the walk comes back to (a string's inside after
// each character) is stepped once per byte, not once per trie node.
struct GrammarMatcher::WalkMemo {
  std::vector<State> states;
  std::unordered_map<std::string, uint32_t> ids;            // a state's key -> its index
  std::unordered_map<uint64_t, int64_t> steps;              // (state, byte) -> next state, -1 dead

  uint32_t Intern(State state) {
    std::string key = MaskCache::StateKey(state);
    auto [it, added] = ids.emplace(std::move(key), static_cast<uint32_t>(states.size()));
    if (added) states.push_back(std::move(state));
    return it->second;
  }
};

void GrammarMatcher::FillMask(const TokenTrie& trie, std::vector<uint8_t>& allowed, MaskCache* shared) const {
  const State& now = history_.back();
  for (auto it = masks_.begin(); it != masks_.end(); ++it) {
    if (it->trie == &trie && it->state == now) {
      allowed = it->allowed;
      CachedMask hit = std::move(*it);  // the newest now
      masks_.erase(it);
      masks_.push_back(std::move(hit));
      return;
    }
  }
  if (std::shared_ptr<const std::vector<uint8_t>> found = shared != nullptr ? shared->Find(*grammar_, now) : nullptr) {
    allowed = *found;
  } else {
    allowed.assign(trie.vocab_size(), 0);
    WalkMemo memo;
    Walk(trie, 0, memo.Intern(now), memo, allowed);
    if (shared != nullptr) shared->Add(*grammar_, now, allowed);
  }
  if (masks_.size() >= kCachedMasks) masks_.pop_front();
  masks_.push_back(CachedMask{.state = now, .trie = &trie, .allowed = allowed});
}

std::string MaskCache::Key(const Grammar& grammar, const GrammarMatcher::State& state) {
  std::string key = grammar.source;
  key.push_back('\0');
  return key + StateKey(state);
}

std::string MaskCache::StateKey(const GrammarMatcher::State& state) {
  std::string key;
  auto put = [&key](uint32_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(state.code_point);
  put(state.pending);
  put(state.length);
  for (const GrammarMatcher::Stack& stack : state.stacks) {
    put(static_cast<uint32_t>(stack.size()));
    for (const GrammarMatcher::Position& p : stack) {
      put(p.rule);
      put(p.alternative);
      put(p.element);
    }
  }
  return key;
}

std::shared_ptr<const std::vector<uint8_t>> MaskCache::Find(const Grammar& grammar, const GrammarMatcher::State& state) {
  if (grammar.source.empty()) return nullptr;  // a grammar made in code, not parsed: no key
  const std::string key = Key(grammar, state);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  entries_.splice(entries_.begin(), entries_, it->second);
  ++hits_;
  return it->second->second;
}

void MaskCache::Add(const Grammar& grammar, const GrammarMatcher::State& state, std::vector<uint8_t> mask) {
  if (grammar.source.empty() || capacity_ == 0) return;
  std::string key = Key(grammar, state);
  std::lock_guard<std::mutex> lock(mu_);
  if (index_.contains(key)) return;
  entries_.emplace_front(key, std::make_shared<const std::vector<uint8_t>>(std::move(mask)));
  index_[std::move(key)] = entries_.begin();
  while (entries_.size() > capacity_) {
    index_.erase(entries_.back().first);
    entries_.pop_back();
  }
}

size_t MaskCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

void GrammarMatcher::Walk(const TokenTrie& trie, uint32_t node, uint32_t state, WalkMemo& memo,
                          std::vector<uint8_t>& allowed) const {
  for (const auto& [byte, child] : trie.node(node).children) {
    const uint64_t step = (uint64_t{state} << 8) | byte;
    auto it = memo.steps.find(step);
    if (it == memo.steps.end()) {
      State next = memo.states[state];
      const int64_t id = Step(next, byte) ? static_cast<int64_t>(memo.Intern(std::move(next))) : -1;
      it = memo.steps.emplace(step, id).first;
    }
    if (it->second < 0) continue;  // nothing under this prefix
    for (const int32_t token : trie.node(child).tokens) allowed[token] = 1;
    Walk(trie, child, static_cast<uint32_t>(it->second), memo, allowed);
  }
}

}  // namespace octo
