// How many positions a sequence may use: a session's (asked, or the
// default), a one-shot job's (all the model's trained context the KV budget
// holds, or Ollama's num_ctx), and what happens to a prompt longer than that:
// refused naming both sizes, or cut as Ollama cuts it.
#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "daemon/core/runtime_impl.h"
#include "daemon/engine/context_limit.h"

namespace octo {
namespace {

int TrainedContext(const LoadedModel& model) {
  return static_cast<int>(std::min(model.config().context_length, 1u << 30));
}

}  // namespace

int RuntimeImpl::ServableContext(const LoadedModel& model) const {
  // The most positions whose cache, full, fits the budget (a cache of n
  // positions grows to at most n): a cache type of fewer bytes per position
  // serves a longer context. At least 1.
  const uint64_t fits = model.NewCache(1)->PositionsWithin(options_.kv_budget_bytes);
  return static_cast<int>(std::clamp<uint64_t>(fits, 1, static_cast<uint64_t>(TrainedContext(model))));
}

int RuntimeImpl::SessionContext(uint32_t asked, const LoadedModel& model) const {
  const uint32_t want = asked > 0 ? asked : options_.session_context;
  return std::min(static_cast<int>(std::min(want, 1u << 30)), ServableContext(model));
}

int RuntimeImpl::OneShotContext(const GenerateJob& job, const LoadedModel& model) const {
  const int servable = ServableContext(model);
  return job.context_length > 0 ? std::min(job.context_length, servable) : servable;
}

void RuntimeImpl::TruncateAsOllama(const GenerateJob& job, int context, std::vector<int32_t>& prompt) const {
  if (!job.truncate_keep.has_value() || context < 2) return;
  // Room to generate: max_tokens of it, at most half the context; a
  // quarter of it when the job sets no max_tokens.
  const int max_tokens = job.sampling.max_tokens;
  const int room = std::clamp(max_tokens > 0 ? std::min(max_tokens, context / 2) : context / 4, 1, context - 1);
  const size_t limit = static_cast<size_t>(context - room);
  if (prompt.size() <= limit) return;
  const size_t keep = std::min(static_cast<size_t>(std::max(*job.truncate_keep, 0)), limit / 2);
  const size_t before = prompt.size();
  prompt.erase(prompt.begin() + static_cast<std::ptrdiff_t>(keep),
               prompt.begin() + static_cast<std::ptrdiff_t>(keep + (before - limit)));
  Log(absl::StrCat("truncating input prompt (", job.origin.empty() ? "a request" : job.origin, "): context ", context,
                   ", prompt ", before, " tokens, kept the first ", keep, " and the last ", limit - keep, ", ",
                   room, " left to generate"));
}

absl::Status RuntimeImpl::ContextTooSmall(size_t prompt_tokens, const Session& session,
                                         const LoadedModel& model) const {
  const int context = session.kv->max_positions();
  const int trained = static_cast<int>(std::min(model.config().context_length, 1u << 30));
  std::string why;
  if (!session.temporary) {
    why = absl::StrCat(" (this session was made with ", context, " positions; start a larger one)");
  } else if (context >= trained) {
    why = " (the model's trained context)";
  } else if (context == ServableContext(model)) {
    why = absl::StrCat(" (the model's context is ", trained, "; the KV budget, kv_budget = ",
                       options_.kv_budget_bytes, " bytes, holds ", context, " positions)");
  } else {
    why = " (the context the request asked for)";
  }
  return ContextExceededError(static_cast<int64_t>(prompt_tokens), context, why);
}

}  // namespace octo
