// A reasoning model's output held to a grammar: the model first thinks in
// <think>...</think>, freely, and the constraint starts after it (as
// llama.cpp and Ollama hold Qwen3 and DeepSeek R1 only past their thoughts).
// The core wraps a constraint so on a model whose chat template thinks,
// unless the grammar mentions kThinkOpen: then it writes the thought itself.
#pragma once

#include "absl/strings/string_view.h"
#include "daemon/grammar/grammar.h"

namespace octo {

inline constexpr absl::string_view kThinkOpen = "<think>";
inline constexpr absl::string_view kThinkClose = "</think>";

// `grammar` behind an optional thought: blanks, "<think>", any text up to
// the first "</think>", blanks, then a match of `grammar`. A reply without a
// thought matches `grammar` alone.
Grammar ThinkFirst(Grammar grammar);

}  // namespace octo
