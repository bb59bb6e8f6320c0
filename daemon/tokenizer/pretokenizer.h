// Pre-tokenizers for byte-level BPE: text -> words, before any merge.
//
// A model names its pre-tokenizer in `tokenizer.ggml.pre`; llama.cpp maps
// the name to a list of regexes applied in turn, each one splitting every
// piece the previous one produced (a regex's matches and the text between
// them all become pieces). The same lists are written here by hand as
// SplitSteps, with the character classes from unicode.h, so no regex engine
// is involved. Each step's comment gives the regex it implements.
//
// Supported names (llama.cpp's grouping):
//   gpt-2 family   "gpt-2" "phi-2" "mpt" "olmo" "jais" "trillion" "exaone4"
//   default        "default", and a missing key (llama.cpp warns and uses it)
//   llama-3 family "llama3" "llama-v3" "llama-bpe" "falcon3" "falcon-h1"
//                  "pixtral" "lfm2" (these also take a word that is a token
//                  whole, and add BOS by default); "dbrx" "smaug-bpe"
//   qwen2 family   "qwen2" "deepseek-r1-qwen" "stablelm2" "megrez"
//   digits first   "smollm" "starcoder" "refact" "command-r" "codeshell"
//                  "exaone" "minerva-7b"
//   falcon         "falcon"
// Anything else is INVALID_ARGUMENT naming the pre-tokenizer.
//
// Everything here is pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace octo::tokenizer {

enum class SplitStep {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3,
  // kLlama3 with \p{N} in place of \p{N}{1,3}: one digit per word.
  kQwen2,
  // \p{N}: every number character alone.
  kEachNumber,
  // \p{N}+
  kNumberRuns,
  // [\p{P}\$\+<=>\^~\|]+  (llama.cpp's "default" list starts with it)
  kPunctuationRuns,
  // [\p{P}\$\+<=>\^~\|`]+  (falcon's)
  kPunctuationRunsWithBacktick,
  // [0-9][0-9][0-9]
  kAsciiDigitTriples,
};

struct PreTokenizer {
  std::string name;              // as given in tokenizer.ggml.pre ("" when absent)
  std::vector<SplitStep> steps;  // applied in order
  bool ignore_merges = false;    // a word that is itself a token is taken whole
  bool add_bos_default = false;  // add_bos_token when the metadata does not say
};

// The pre-tokenizer called `name` ("" = the key is absent). INVALID_ARGUMENT
// naming it when unknown.
absl::StatusOr<PreTokenizer> FindPreTokenizer(absl::string_view name);

// Applies one step to each piece of `cpts` (code points; `pieces` are
// lengths in code points summing to cpts.size()) and returns the new piece
// lengths, each > 0, summing to cpts.size().
std::vector<size_t> ApplySplitStep(SplitStep step, std::span<const uint32_t> cpts, std::span<const size_t> pieces);

// Splits `text` into words: decodes it (ill-formed bytes become U+FFFD, see
// unicode.h), applies the steps, and returns each word as UTF-8. The words
// concatenate to the decoded-and-re-encoded text (== `text` when it is
// well-formed UTF-8).
std::vector<std::string> PreTokenize(const PreTokenizer& pre, absl::string_view text);

}  // namespace octo::tokenizer
