// Real tokenizers for the fuzz targets, built in memory from octo-make-model's
// generated vocabularies (tests/tools/model_presets.h), so the targets need
// no file: a SentencePiece one (preset "tiny") and byte-level BPE ones with
// the qwen2 and llama-bpe pre-tokenizers.
#pragma once

#include <span>

#include "daemon/tokenizer/tokenizer.h"

namespace octo::fuzzing {

// Built on first use; aborts if a generated vocabulary does not load (a
// bug in the generator or the tokenizer, not in the fuzzed input).
std::span<const Tokenizer> FuzzTokenizers();

}  // namespace octo::fuzzing
