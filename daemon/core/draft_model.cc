#include "daemon/core/draft_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "storage/bounded_json.h"
#include "storage/status_macros.h"

namespace octo {

absl::Status CheckSameVocabulary(const Tokenizer& target, uint32_t target_logits, const Tokenizer& draft,
                                 uint32_t draft_logits) {
  if (target.vocab_size() != draft.vocab_size() || target_logits != draft_logits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "its vocabulary differs from the target's: ", draft.vocab_size(), " tokens (", draft_logits,
        " logits) against the target's ", target.vocab_size(), " (", target_logits, ")"));
  }
  for (int32_t id = 0; id < target.vocab_size(); ++id) {
    if (target.TokenText(id) != draft.TokenText(id)) {
      return absl::InvalidArgumentError(absl::StrCat("its vocabulary differs from the target's at token ", id, ": ",
                                                     QuotePrefix(draft.TokenText(id), 40), " in the draft, ",
                                                     QuotePrefix(target.TokenText(id), 40), " in the target"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<DraftModel>> DraftModel::Load(const DraftLoadOptions& options,
                                                             const Tokenizer& target, uint32_t target_logits) {
  const std::string name = absl::StrCat("draft model ", QuotePrefix(options.path));
  std::shared_ptr<DraftModel> draft(new DraftModel());
  draft->path_ = options.path;
  ModelOptions model_options;
  model_options.backend = options.backend;
  model_options.gpu = options.gpu;
  model_options.n_threads = options.n_threads;
  model_options.allow_simd = options.allow_simd;
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Open(options.dir, model_options);
  if (!model.ok()) return Annotate(model.status(), name);
  draft->model_ = std::move(*model);
  if (IsEncoderArchitecture(draft->model_->config().architecture)) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is an embedding model (",
                                                   draft->model_->config().architecture, "): it cannot draft tokens"));
  }
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::FromMetadata(draft->model_->manifest().tokenizer);
  if (!tokenizer.ok()) return Annotate(tokenizer.status(), name);
  OCTO_RETURN_IF_ERROR(Annotate(
      CheckSameVocabulary(target, target_logits, *tokenizer, draft->model_->config().vocab_size), name));
  for (const ManifestFile& f : draft->model_->manifest().files) draft->bytes_ += f.size;
  return draft;
}

bool DraftModel::recurrent() const { return IsHybridArchitecture(model_->config().architecture); }

}  // namespace octo
