// A reasoning model's output held to a grammar: the model first thinks in
// <think>...</think>, freely, and the constraint starts after it (as
// llama.cpp and Ollama hold Qwen3 and DeepSeek R1 only past their thoughts).
// The core wraps a constraint so on a model whose chat template thinks,
// unless the grammar mentions kThinkOpen: then it writes the thought itself.
//
// TextUntilRules is the piece both this and lazy tool-call grammars
// (daemon/chat/tool_calls.h) are made of: free text up to a tag.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "daemon/grammar/grammar.h"

namespace octo {

inline constexpr absl::string_view kThinkOpen = "<think>";
inline constexpr absl::string_view kThinkClose = "</think>";

// GBNF rules NAME-0 .. NAME-(n-1) (n = tag.size()): NAME-0 matches any text
// up to and including the first `tag`, then `after` (a GBNF expression; ""
// for nothing). With `may_end`, the text may also end anywhere before the
// tag (the tag never came). The tag's first character must not appear in
// the rest of it ("</think>", "<tool_call>"), so a mismatch restarts
// simply; it is the caller's to pick such tags.
std::string TextUntilRules(absl::string_view tag, absl::string_view name, absl::string_view after, bool may_end);

// `grammar` behind an optional thought: blanks, "<think>", any text up to
// the first "</think>", blanks, then a match of `grammar`. A reply without a
// thought matches `grammar` alone.
Grammar ThinkFirst(Grammar grammar);

}  // namespace octo
