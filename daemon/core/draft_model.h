// DraftModel: the small model that proposes tokens for speculative decoding
// (speculation.h). It is a whole layer directory under the models root,
// every layer resident, run in this process on the target's backend (the
// CPU, or the same CUDA device), and it must share the target's vocabulary
// exactly: a proposal is a token id, and the target scores the same id.
//
// Threading: Load from any thread; the model's Forward only from the
// scheduler thread (one pass at a time, as the target's).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/engine/model.h"
#include "daemon/tokenizer/tokenizer.h"

namespace octo {

// OK when `draft` has the target's vocabulary: the same number of tokens
// (in the tokenizer and in the model's logits) and the same text for each.
// INVALID_ARGUMENT naming the difference otherwise: the two sizes, or the
// first id whose text differs, with both texts.
absl::Status CheckSameVocabulary(const Tokenizer& target, uint32_t target_logits, const Tokenizer& draft,
                                 uint32_t draft_logits);

struct DraftLoadOptions {
  std::string dir;              // absolute model directory
  std::string path;             // as the client named it (relative to the models root)
  std::string backend = "cpu";  // the target's backend kind: "cpu" or "cuda"
  int gpu = 0;
  int n_threads = 0;
  bool allow_simd = true;
};

class DraftModel {
 public:
  // Opens the directory (checksums checked), all layers resident, and checks
  // its vocabulary against the target's (CheckSameVocabulary). Errors name
  // the draft: "draft model 'tiny': ...".
  static absl::StatusOr<std::shared_ptr<DraftModel>> Load(const DraftLoadOptions& options, const Tokenizer& target,
                                                         uint32_t target_logits);

  Model& model() { return *model_; }
  const std::string& path() const { return path_; }
  // A hybrid draft's recurrent state follows one path: its drafts are linear.
  bool recurrent() const;
  uint64_t bytes() const { return bytes_; }  // its weights (the layer directory's files)

 private:
  DraftModel() = default;
  std::unique_ptr<Model> model_;
  std::string path_;
  uint64_t bytes_ = 0;
};

}  // namespace octo
