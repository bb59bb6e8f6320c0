#include "tests/fuzz/fuzz_vocab.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "storage/byte_source.h"
#include "storage/gguf.h"
#include "tests/tools/gguf_writer.h"
#include "tests/tools/model_presets.h"
#include "tests/tools/model_tensors.h"

namespace octo::fuzzing {
namespace {

void Check(const absl::Status& status, const char* what) {
  if (status.ok()) return;
  std::fprintf(stderr, "fuzz_vocab: %s: %s\n", what, status.ToString().c_str());
  std::abort();
}

// The tokenizer of a header-only GGUF that carries `shape`'s generated
// vocabulary: the same keys a decomposed model's manifest holds.
Tokenizer Build(testing::ModelShape shape) {
  absl::StatusOr<testing::GeneratedVocab> vocab = testing::MakeVocab(shape);
  Check(vocab.status(), "MakeVocab");
  absl::StatusOr<testing::TypeRecipe> recipe = testing::ParseTypeRecipe("F32");
  Check(recipe.status(), "ParseTypeRecipe");
  testing::GgufWriter writer;
  testing::AddModelMetadata(shape, *recipe, *vocab, writer);
  absl::StatusOr<std::string> header = writer.HeaderBytes();
  Check(header.status(), "HeaderBytes");
  absl::StatusOr<GgufFile> file =
      GgufFile::Parse(std::make_unique<MemorySource>(std::vector<uint8_t>(header->begin(), header->end())));
  Check(file.status(), "GgufFile::Parse");
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::FromMetadata(file->metadata());
  Check(tokenizer.status(), "Tokenizer::FromMetadata");
  return *std::move(tokenizer);
}

testing::ModelShape Preset(const char* name) {
  absl::StatusOr<testing::ModelShape> shape = testing::FindPreset(name);
  Check(shape.status(), name);
  return *shape;
}

}  // namespace

std::span<const Tokenizer> FuzzTokenizers() {
  static const std::vector<Tokenizer>* tokenizers = [] {
    testing::ModelShape llama_bpe = Preset("tiny-qwen2");
    llama_bpe.tokenizer_pre = "llama-bpe";
    return new std::vector<Tokenizer>{Build(Preset("tiny")), Build(Preset("tiny-qwen2")), Build(llama_bpe)};
  }();
  return *tokenizers;
}

}  // namespace octo::fuzzing
