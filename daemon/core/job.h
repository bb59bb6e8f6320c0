// Job: one Generate/Chat request on its way through the scheduler -- the
// Generation (what to feed, what to do with the logits), the session it
// runs in, its sink, its timing.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/runtime.h"
#include "daemon/core/session.h"
#include "daemon/core/speculation.h"
#include "daemon/engine/embedding.h"
#include "daemon/engine/generation.h"
#include "daemon/tokenizer/tokenizer.h"

namespace octo {

class LoadedModel;

class Job : public JobHandle {
 public:
  using Clock = std::chrono::steady_clock;

  Job(std::shared_ptr<Session> session, Generation generation, std::shared_ptr<TokenSink> sink,
      std::vector<ChatMessage> new_messages, int cached_tokens);

  void Cancel() override { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

  Session& session() { return *session_; }
  Generation& generation() { return generation_; }
  JobDraft& draft() { return draft_; }
  TokenSink& sink() { return *sink_; }
  JobStats& stats() { return stats_; }
  // An embedding job (Runtime::Embed): its passes output hidden states,
  // pooled here, and it generates nothing; unset for a generation.
  std::optional<EmbeddingPool>& embedding() { return embedding_; }
  // What asked for it (GenerateJob::origin) and the model it ran on, for the request log.
  std::string& origin() { return origin_; }
  std::string& model() { return model_; }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - submitted_).count(); }
  bool started() const { return started_.load(std::memory_order_relaxed); }  // read by Report() too

  // Text sent to the client, kept for a chat session's history.
  void RecordText(const std::string& text) { reply_ += text; }
  // The first pass that includes this job.
  void MarkStarted();
  // Adds one pass's times: `seconds` of wall time, in a batch of `batch` sequences.
  void AddPass(double seconds, double load_wait, double compute, int batch, bool prefill);
  // Ends the job: updates its session (tokens, chat turns, idle time) and
  // calls the sink's OnDone. finish: "stop", "length", "context", "cancelled".
  void Finish(const absl::Status& status, const std::string& finish);

 private:
  std::shared_ptr<Session> session_;
  Generation generation_;
  JobDraft draft_;
  std::shared_ptr<TokenSink> sink_;
  std::vector<ChatMessage> new_messages_;  // a chat turn: joins the session's messages at the end
  std::string reply_;                      // generated text so far (for the chat history)
  JobStats stats_;
  std::optional<EmbeddingPool> embedding_;
  std::string origin_, model_;
  Clock::time_point submitted_ = Clock::now();
  std::atomic<bool> started_{false};
  bool finished_ = false;
  std::atomic<bool> cancelled_{false};
};

// The prompt tokens a request feeds in `session`: the session's tokens plus
// the new text or tokens, or for a chat the whole conversation rendered
// again. Errors name the request's problem (INVALID_ARGUMENT).
absl::StatusOr<std::vector<int32_t>> JobPromptTokens(const GenerateJob& request, const Session& session,
                                                     const LoadedModel& model, std::vector<ChatMessage>* new_messages);

// Checks the request's sizes and fields (not the session or the model).
absl::Status ValidateJob(const GenerateJob& request);

}  // namespace octo
