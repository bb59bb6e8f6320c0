// The runtime's draft models (speculative decoding): each loaded model's
// default, and those requests name, loaded on first use for their target; and how a job and
// its session get their draft and the draft's cache.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/core/model_paths.h"
#include "daemon/core/runtime_impl.h"
#include "storage/bounded_json.h"
#include "storage/status_macros.h"

namespace octo {

absl::StatusOr<std::shared_ptr<DraftModel>> RuntimeImpl::LoadDraft(const std::string& path,
                                                                   const std::string& target_name,
                                                                   const Tokenizer& target, uint32_t target_logits,
                                                                   const std::string& backend) {
  std::lock_guard<std::mutex> lock(drafts_mu_);
  const std::string key = DraftKey(target_name, path);
  if (auto it = drafts_.find(key); it != drafts_.end()) return it->second;
  if (drafts_.size() >= kMaxDraftModels) {
    // Make room: a draft no session or job holds any more goes.
    for (auto it = drafts_.begin(); it != drafts_.end();) {
      it = it->second.use_count() == 1 ? drafts_.erase(it) : std::next(it);
    }
    if (drafts_.size() >= kMaxDraftModels) {
      return absl::ResourceExhaustedError(absl::StrCat("draft model ", QuotePrefix(path), ": ", drafts_.size(),
                                                       " draft models are in use (the limit); use one of them"));
    }
  }
  OCTO_ASSIGN_OR_RETURN(const ResolvedModel resolved, ResolveModelPath(options_.models_root, path));
  OCTO_ASSIGN_OR_RETURN(const std::string dir, ModelDir(resolved));
  OCTO_ASSIGN_OR_RETURN(std::shared_ptr<DraftModel> draft,
                        DraftModel::Load(DraftLoadOptions{.dir = dir,
                                                          .path = path,
                                                          .backend = backend,
                                                          .gpu = options_.gpu,
                                                          .n_threads = options_.n_threads,
                                                          .allow_simd = options_.allow_simd},
                                         target, target_logits));
  drafts_[key] = draft;
  return draft;
}

absl::StatusOr<std::shared_ptr<DraftModel>> RuntimeImpl::ResolveDraft(const GenerateJob& request,
                                                                      const LoadedModel& target) {
  if (!request.draft_model.has_value() || request.draft_model->empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    const ModelSlot* slot = SlotOf(target);
    return slot != nullptr ? slot->draft : nullptr;
  }
  if (*request.draft_model == kNoDraftModel) return std::shared_ptr<DraftModel>();
  return LoadDraft(*request.draft_model, target.summary().path, target.tokenizer(), target.config().vocab_size,
                   target.backend_kind());
}

JobDraft RuntimeImpl::NewJobDraft(std::shared_ptr<DraftModel> draft, const GenerateJob& request) const {
  JobDraft d;
  d.model = std::move(draft);
  d.settings = speculation_;
  if (request.draft_max.has_value()) {
    d.settings.draft_max = *request.draft_max;
    d.settings.draft_min = std::min(d.settings.draft_min, d.settings.draft_max);
  }
  d.k = d.settings.draft_max;
  return d;
}

}  // namespace octo
