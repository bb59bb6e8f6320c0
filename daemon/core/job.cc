#include "daemon/core/job.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/core/loaded_model.h"
#include "storage/status_macros.h"

namespace octo {

Job::Job(std::shared_ptr<Session> session, Generation generation, std::shared_ptr<TokenSink> sink,
         std::vector<ChatMessage> new_messages, int cached_tokens)
    : session_(std::move(session)),
      generation_(std::move(generation)),
      sink_(std::move(sink)),
      new_messages_(std::move(new_messages)) {
  stats_.cached_tokens = cached_tokens;
  stats_.prompt_tokens = generation_.prompt_tokens() - cached_tokens;
  stats_.seed = generation_.seed();
}

void Job::MarkStarted() {
  if (started()) return;
  started_.store(true, std::memory_order_relaxed);
  stats_.queue_seconds = std::chrono::duration<double>(Clock::now() - submitted_).count();
  sink_->OnStarted(session_->temporary ? std::string() : session_->id, stats_.prompt_tokens);
}

void Job::AddPass(double seconds, double load_wait, double compute, int batch, bool prefill) {
  (prefill ? stats_.prefill_seconds : stats_.decode_seconds) += seconds;
  stats_.load_wait_seconds += load_wait;
  stats_.compute_seconds += compute;
  stats_.batch_peak = std::max(stats_.batch_peak, batch);
}

void Job::Finish(const absl::Status& status, const std::string& finish) {
  if (finished_) return;
  finished_ = true;
  std::string tail = status.ok() ? generation_.TakeTail() : std::string();
  reply_ += tail;
  stats_.generated_tokens = generation_.generated_tokens();
  stats_.draft_proposed = static_cast<int>(draft_.proposed);
  stats_.draft_accepted = static_cast<int>(draft_.accepted);
  Session& s = *session_;
  s.tokens = generation_.history();
  if (!new_messages_.empty()) {
    for (ChatMessage& m : new_messages_) s.messages.push_back(std::move(m));
    s.messages.push_back({"assistant", reply_});
  }
  s.busy = false;
  s.last_used = Clock::now();
  if (!started()) sink_->OnStarted(s.temporary ? std::string() : s.id, stats_.prompt_tokens);
  sink_->OnDone(status, finish, tail, stats_);
}

absl::Status ValidateJob(const GenerateJob& r) {
  if (r.session_id.size() > kMaxSessionIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("session_id is ", r.session_id.size(), " bytes; the limit is ",
                                                   kMaxSessionIdBytes));
  }
  const int inputs = !r.prompt.empty() + !r.prompt_tokens.empty() + !r.messages.empty();
  if (inputs == 0) return absl::InvalidArgumentError("the request has no prompt (prompt, prompt_tokens or messages)");
  if (inputs > 1) return absl::InvalidArgumentError("the request has more than one of prompt, prompt_tokens, messages");
  if (r.prompt.size() > kMaxPromptBytes) {
    return absl::InvalidArgumentError(absl::StrCat("prompt is ", r.prompt.size(), " bytes; the limit is ",
                                                   kMaxPromptBytes));
  }
  if (r.messages.size() > kMaxChatMessages) {
    return absl::InvalidArgumentError(absl::StrCat("the chat has ", r.messages.size(), " messages; the limit is ",
                                                   kMaxChatMessages));
  }
  for (size_t i = 0; i < r.messages.size(); ++i) {
    if (r.messages[i].content.size() > kMaxPromptBytes) {
      return absl::InvalidArgumentError(absl::StrCat("message ", i, " is ", r.messages[i].content.size(),
                                                     " bytes; the limit is ", kMaxPromptBytes));
    }
  }
  if (r.draft_max.has_value() && (*r.draft_max < 1 || *r.draft_max > kMaxDraftTokens)) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft_max is ", *r.draft_max, "; it must be 1..", kMaxDraftTokens));
  }
  return ValidateSamplingParams(r.sampling);
}

absl::StatusOr<std::vector<int32_t>> JobPromptTokens(const GenerateJob& r, const Session& session,
                                                     const LoadedModel& model, std::vector<ChatMessage>* new_messages) {
  const Tokenizer& tokenizer = model.tokenizer();
  if (!r.messages.empty()) {
    absl::StatusOr<ChatTemplate> chat_template = r.chat_template.empty() ? model.chat_template()
                                                                         : ChatTemplate::FromName(r.chat_template);
    if (!chat_template.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("chat template: ", chat_template.status().message()));
    }
    std::vector<ChatMessage> all = session.messages;
    all.insert(all.end(), r.messages.begin(), r.messages.end());
    OCTO_ASSIGN_OR_RETURN(std::string text, chat_template->Apply(all, /*add_generation_prompt=*/true));
    *new_messages = r.messages;
    std::vector<int32_t> tokens =
        tokenizer.Encode(text, /*add_special=*/r.add_bos && !chat_template->renders_bos(), /*parse_special=*/true);
    // add_bos false: the chat continues tokens given elsewhere (Ollama's
    // context), so no BOS, even one the template writes itself.
    if (!r.add_bos && !tokens.empty() && tokens.front() == tokenizer.bos()) tokens.erase(tokens.begin());
    return tokens;
  }
  std::vector<int32_t> tokens = session.tokens;
  if (!r.prompt_tokens.empty()) {
    tokens.insert(tokens.end(), r.prompt_tokens.begin(), r.prompt_tokens.end());
  } else {
    const bool add_special = r.add_bos && session.tokens.empty();
    const std::vector<int32_t> fresh = tokenizer.Encode(r.prompt, add_special, r.parse_special);
    tokens.insert(tokens.end(), fresh.begin(), fresh.end());
  }
  if (tokens.size() == session.tokens.size()) return absl::InvalidArgumentError("the prompt has no tokens");
  return tokens;
}

}  // namespace octo
