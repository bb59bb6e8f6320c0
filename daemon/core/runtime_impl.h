// RuntimeImpl: the Runtime (runtime.h) of octod. This header is for the
// core's own files and tests; everyone else uses Runtime.
//
// Locks: mu_ guards the session table, the job queue and the model pointer;
// pass_mu_ is held by the scheduler for one forward pass and by control
// operations (load, unload, residency), so those run between passes. Order:
// pass_mu_ before mu_. Sinks are called without mu_.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "daemon/core/draft_model.h"
#include "daemon/core/job.h"
#include "daemon/core/loaded_model.h"
#include "daemon/core/model_paths.h"
#include "daemon/core/runtime.h"
#include "daemon/core/throughput.h"
#include "daemon/loader/stop_signal.h"

namespace octo {

// Tokens one pass may carry: decode steps first, prompt chunks fill the rest.
inline constexpr int kMinPassTokens = 64;
// Draft models held at once: the loaded model's and those requests name.
inline constexpr size_t kMaxDraftModels = 4;

class RuntimeImpl : public Runtime {
 public:
  // `factory` makes the loader streams (LayerStream::Start in octod).
  static absl::StatusOr<std::unique_ptr<RuntimeImpl>> Create(const RuntimeOptions& options,
                                                             LayerStreamFactory factory);
  ~RuntimeImpl() override;

  absl::StatusOr<ModelSummary> LoadModel(const std::string& path,
                                         const std::optional<std::string>& draft_model) override;
  absl::Status UnloadModel() override;
  absl::StatusOr<std::vector<ModelSummary>> ListModels() override;
  absl::Status CreateModel(const std::string& name, const std::string& gguf, const CreateWatcher& watch) override;
  absl::Status CopyModel(const std::string& source, const std::string& destination) override;
  absl::Status DeleteModel(const std::string& name) override;
  absl::StatusOr<SessionReport> CreateSession(uint32_t context_length, const std::string& owner,
                                              const std::string& name = "") override;
  absl::Status CloseSession(const std::string& id, const std::string& owner) override;
  absl::StatusOr<std::shared_ptr<JobHandle>> Submit(GenerateJob job, std::shared_ptr<TokenSink> sink) override;
  absl::StatusOr<EmbedResult> Embed(const EmbedJob& job, const std::function<bool()>& cancelled) override;
  absl::StatusOr<std::vector<int32_t>> Tokenize(const std::string& text, bool add_bos, bool parse_special,
                                                std::vector<std::string>* pieces) override;
  absl::StatusOr<std::string> Detokenize(const std::vector<int32_t>& tokens) override;
  absl::StatusOr<std::vector<int32_t>> PromptTokens(const GenerateJob& job) override;
  absl::StatusOr<ResidencyReport> SetResidency(const ResidencyChange& change) override;
  RuntimeReport Report() override;
  void Shutdown() override;
  absl::Duration PassSilence() override;

 private:
  using Clock = std::chrono::steady_clock;
  struct Step {
    std::shared_ptr<Job> job;
    size_t tokens = 0;   // fed this pass
    bool decides = false;  // the pass's logits draw the job's next token
    bool decode = false;   // the prompt is in
    int draft_nodes = 0;   // draft tokens the step may carry (speculation.h)
  };

  // Holds pass_mu_ for a control operation: the scheduler lets it in before
  // its next pass, and is woken again when it ends.
  class ControlScope {
   public:
    explicit ControlScope(RuntimeImpl& r) : r_(r) {
      ++r_.control_waiting_;
      r_.pass_mu_.lock();
      --r_.control_waiting_;
    }
    ~ControlScope() {
      r_.pass_mu_.unlock();
      r_.work_cv_.notify_all();
    }

   private:
    RuntimeImpl& r_;
  };

  RuntimeImpl(const RuntimeOptions& options, LayerStreamFactory factory);
  std::shared_ptr<LoadedModel> model() const;

  // Loading (runtime_load.cc). Where a loaded model came from, to load it
  // again when its replacement fails.
  struct LoadedFrom {
    std::string name, dir, draft;
  };
  void Log(absl::string_view line) const;
  std::string CacheDir() const;
  void SetLoading(const std::optional<LoadProgress>& loading);
  // The layer directory of `model`: a GGUF is decomposed into the cache
  // (or its earlier copy reused), with progress in loading_ and the log.
  absl::StatusOr<std::string> ModelDir(const ResolvedModel& model);
  absl::StatusOr<ModelSummary> LoadResolved(const ResolvedModel& resolved,
                                            const std::optional<std::string>& draft_model);
  // Drops the model, its sessions and drafts (under a ControlScope).
  void DropModel();
  absl::StatusOr<ModelSummary> OpenModel(const std::string& name, const std::string& dir,
                                         const std::string& draft_path);
  // The model's summary with its draft model.
  ModelSummary Summary(const LoadedModel& model) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A session's positions: `asked`, or options_.session_context when 0,
  // capped by ServableContext.
  int SessionContext(uint32_t asked, const LoadedModel& model) const;
  // The most positions one sequence can use: the model's trained context,
  // or fewer when the KV budget cannot hold that many for it alone.
  int ServableContext(const LoadedModel& model) const;
  // The longest input `model` can embed: as ServableContext, for a cache
  // sized to the input (as Embed makes it) rather than one that grows.
  int EmbedContext(const LoadedModel& model) const;
  // The loaded model `m` when a request names no model or that one;
  // FAILED_PRECONDITION naming both otherwise.
  static absl::Status CheckRequestedModel(const std::string& requested, const LoadedModel& m);
  // A one-shot job's positions: job.context_length (0: ServableContext),
  // capped by ServableContext.
  int OneShotContext(const GenerateJob& job, const LoadedModel& model) const;
  // With job.truncate_keep: cuts `prompt` to fit `context` as
  // GenerateJob.truncate_keep says, and logs it.
  void TruncateAsOllama(const GenerateJob& job, int context, std::vector<int32_t>& prompt) const;
  // The error for a prompt of `prompt_tokens` that `session` cannot hold,
  // saying what limits it.
  absl::Status ContextTooSmall(size_t prompt_tokens, const Session& session, const LoadedModel& model) const;
  static std::string NewSessionId();
  // sessions_'s key for the session `owner` calls `id`: a random id is its
  // own key; a name is its owner's (two credentials may use one name).
  static std::string SessionKey(const std::string& id, const std::string& owner);
  // Sessions counted against max_sessions: all but embedding inputs'.
  size_t SessionsHeld() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An embedding request's inputs as token lists, each fitting `context`
  // (cut when job.truncate; *truncated says whether any was).
  absl::StatusOr<std::vector<std::vector<int32_t>>> EmbedInputs(const EmbedJob& job, const LoadedModel& model,
                                                                int context, bool* truncated) const;
  // Closes the sessions idle longer than options_.session_idle_timeout.
  void CloseIdleSessions() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Speculative decoding (runtime_drafts.cc): the draft model a request
  // names (loaded on first use, at most kMaxDraftModels at once), or the
  // daemon's; null when the job does not speculate.
  absl::StatusOr<std::shared_ptr<DraftModel>> ResolveDraft(const GenerateJob& request, const LoadedModel& target);
  absl::StatusOr<std::shared_ptr<DraftModel>> LoadDraft(const std::string& path, const Tokenizer& target,
                                                        uint32_t target_logits, const std::string& backend);
  // A job's speculation: `draft` (may be null) with the daemon's settings
  // and the request's draft_max.
  JobDraft NewJobDraft(std::shared_ptr<DraftModel> draft, const GenerateJob& request) const;

  // scheduler.cc
  void SchedulerLoop();
  // The next pass's steps; finishes cancelled jobs and jobs the KV budget
  // refuses (into `ended`, to finish outside mu_).
  std::vector<Step> BuildBatch(std::vector<std::pair<std::shared_ptr<Job>, absl::Status>>& ended)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Room in the KV budget for `extra` more bytes, evicting idle sessions when configured.
  bool MakeKvRoom(uint64_t extra) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t KvUsed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Embedding inputs' steps, after the generations': up to
  // embed_batch_tokens of them, each input's cache reserved whole when it
  // starts. One that cannot start waits while anything else runs, else ends
  // RESOURCE_EXHAUSTED (into `ended`).
  void AddEmbeddingSteps(std::vector<Step>& steps, std::vector<std::pair<std::shared_ptr<Job>, absl::Status>>& ended)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Bytes the job's caches grow by for a step of `chunk` tokens and
  // `draft_nodes` draft tokens.
  uint64_t KvGrowth(Job& job, size_t chunk, int draft_nodes) const;
  void RunPass(LoadedModel& model, std::vector<Step>& steps);
  void EndJob(const std::shared_ptr<Job>& job, const absl::Status& status, const std::string& finish);

  const RuntimeOptions options_;
  const LayerStreamFactory factory_;
  const Clock::time_point started_ = Clock::now();
  ResidencySettings residency_;  // guarded by pass_mu_
  VramSettings vram_;            // likewise
  // The options' residency, which a load of another model returns to when
  // SetResidency changed it for residency_model_ (or --reset asks).
  ResidencySettings configured_residency_;
  VramSettings configured_vram_;
  std::string residency_model_;  // guarded by pass_mu_; "" while the configured settings hold
  LoadedFrom loaded_from_;       // guarded by pass_mu_

  std::mutex pass_mu_;
  std::atomic<int> control_waiting_{0};

  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::shared_ptr<LoadedModel> model_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);  // in arrival order
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t passes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generated_ ABSL_GUARDED_BY(mu_) = 0;
  Throughput throughput_ ABSL_GUARDED_BY(mu_);
  JobMetrics job_metrics_;  // its own lock

  // Speculative decoding.
  const SpeculationSettings speculation_;
  std::shared_ptr<DraftModel> default_draft_ ABSL_GUARDED_BY(mu_);  // the loaded model's
  std::mutex drafts_mu_;  // after mu_ when both are held
  std::map<std::string, std::shared_ptr<DraftModel>> drafts_ ABSL_GUARDED_BY(drafts_mu_);
  SpeculationCounters spec_ ABSL_GUARDED_BY(mu_);
  std::optional<LoadProgress> loading_ ABSL_GUARDED_BY(mu_);

  std::vector<float> logits_;        // scheduler thread only
  std::vector<float> hidden_;        // likewise: embedding steps' hidden states
  std::vector<float> draft_logits_;  // likewise
  std::thread scheduler_;
  // When the pass in progress started (steady clock, ns); 0 between passes.
  std::atomic<int64_t> pass_started_ns_{0};
  // Raised by Shutdown before it joins the scheduler: a pass waiting on a
  // loader that makes no progress ends at once (layer_stream.h).
  const std::shared_ptr<StopSignal> stop_ = StopSignal::Create();
};

}  // namespace octo
