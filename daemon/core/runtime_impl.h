// RuntimeImpl: the Runtime (runtime.h) of octod. This header is for the
// core's own files and tests; everyone else uses Runtime.
//
// Locks: load_mu_ serializes loads and unloads (a load may take long: other
// models keep serving); pass_mu_ is held by the scheduler for one forward
// pass and by control operations that change a model in use (residency,
// reloading it), so those run between passes; mu_ guards the loaded models,
// the session table and the job queue. Order: load_mu_, pass_mu_, mu_.
// Sinks are called without mu_.
//
// Several models (runtime_models.cc): each loaded model has its own weights,
// loader and ring; sessions and jobs hold their model (Session::model), so a
// model no one holds is idle and may be unloaded -- least recently used first
// when a load needs room, or when its keep_alive runs out. A pass runs the
// jobs of one model; passes take the models with work in turn.
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

  absl::StatusOr<ModelSummary> LoadModel(const std::string& path, const ModelSettings& settings) override;
  absl::Status UnloadModel(const std::string& name) override;
  absl::StatusOr<ModelSummary> AcquireModel(const std::string& name, bool* loaded_now) override;
  absl::Status SetKeepAlive(const std::string& name, absl::Duration keep_alive) override;
  absl::StatusOr<std::vector<ModelSummary>> ListModels() override;
  absl::Status CreateModel(const std::string& name, const std::string& gguf, const CreateWatcher& watch) override;
  absl::Status CopyModel(const std::string& source, const std::string& destination) override;
  absl::Status DeleteModel(const std::string& name) override;
  absl::StatusOr<SessionReport> CreateSession(uint32_t context_length, const std::string& owner,
                                              const std::string& name = "", const std::string& model = "") override;
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

  // Where a loaded model came from, to load it again when a load that
  // unloaded it fails.
  struct LoadedFrom {
    std::string name, dir, draft;
    KvCacheTypes kv_types;
  };
  // A model in memory: its weights, default draft, settings and use.
  struct ModelSlot {
    std::shared_ptr<LoadedModel> model;   // sessions and jobs hold it too: use_count 1 = idle
    std::shared_ptr<DraftModel> draft;    // its default draft model, may be null
    LoadedFrom from;
    ResidencySettings residency;          // as loaded, or as SetResidency changed them
    VramSettings vram;
    Clock::time_point last_used;          // loaded, or a request asked for it
    absl::Duration keep_alive;            // idle this long: unloaded (infinite: until room is needed)
    uint64_t order = 0;                   // loads since start when it loaded: the newest is the default
  };

  // runtime_models.cc. The model `requested` names (canonical name or
  // path), or the default model when empty; loaded now when `load` and it
  // is not (else FAILED_PRECONDITION). Marks it used; a request's
  // keep_alive (when set) becomes the model's.
  absl::StatusOr<std::shared_ptr<LoadedModel>> ModelFor(const std::string& requested, bool load,
                                                        const std::optional<absl::Duration>& keep_alive = std::nullopt,
                                                        bool* loaded_now = nullptr);
  // No session, job or request holds it: only models_ does.
  static bool Idle(const ModelSlot& slot);
  // A session (a job's too) holds it.
  bool InUse(const ModelSlot& slot) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits (a moment, mu_ let go meanwhile) for the model `name`, which no
  // session holds, to be let go of by the scheduler, a report or a request
  // about to queue on it: true when it is idle.
  bool WaitUntilIdle(const std::string& name, std::unique_lock<std::mutex>& lock) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The loaded models' names, for errors ("none" when none is).
  std::string LoadedNames() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Jobs running or waiting on `model`.
  size_t JobsOn(const LoadedModel& model) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // drafts_'s key for the draft `draft` of the model `target`.
  static std::string DraftKey(const std::string& target, const std::string& draft);
  // The default model (the newest loaded) or null.
  std::shared_ptr<LoadedModel> DefaultModel() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<LoadedModel> model() const;  // DefaultModel under mu_
  ModelSlot* SlotOf(const LoadedModel& model) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unloads idle models whose keep_alive ran out; the time the next one
  // would (Clock::time_point::max() when none).
  Clock::time_point UnloadExpiredModels();
  // Room for a model of `layer_bytes` beside the loaded ones: at most
  // max_loaded_models, and the shared layer (and explicit VRAM) budgets
  // less what the others hold. Unloads idle models, least recently used
  // first, into *evicted until it fits; UNAVAILABLE when only models in use
  // are left. Narrows `residency` and `vram` to the room left.
  absl::Status MakeModelRoom(const std::string& name, const std::vector<uint64_t>& layer_bytes,
                             ResidencySettings& residency, VramSettings& vram, std::vector<ModelSlot>* evicted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(load_mu_);
  // Takes a model out of models_, with its sessions and drafts (its memory
  // goes when the last holder lets go).
  ModelSlot TakeModel(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Lets go of an unloaded slot's weights and draft (outside mu_), keeping
  // where it came from and its settings, to load it again.
  static void Release(ModelSlot& slot);
  // Drafts loaded for `target`, forgotten.
  void DropDrafts(const std::string& target);

  // Loading (runtime_load.cc).
  void Log(absl::string_view line) const;
  std::string CacheDir() const;
  void SetLoading(const std::optional<LoadProgress>& loading);
  // The layer directory of `model`: a GGUF is decomposed into the cache
  // (or its earlier copy reused), with progress in loading_ and the log.
  absl::StatusOr<std::string> ModelDir(const ResolvedModel& model);
  absl::StatusOr<ModelSummary> LoadResolved(const ResolvedModel& resolved, const ModelSettings& settings)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(load_mu_);
  // Opens a model into models_ with these settings.
  absl::StatusOr<ModelSummary> OpenModel(const LoadedFrom& from, const ResidencySettings& residency,
                                         const VramSettings& vram) ABSL_EXCLUSIVE_LOCKS_REQUIRED(load_mu_);
  // The model's summary with its draft model.
  ModelSummary Summary(const LoadedModel& model) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A session's positions: `asked`, or options_.session_context when 0,
  // capped by ServableContext.
  int SessionContext(uint32_t asked, const LoadedModel& model) const;
  // The most positions one sequence can use: the model's trained context,
  // or fewer when the KV budget cannot hold a cache of that many (at its
  // cache types) for it alone. Also the longest input it can embed.
  int ServableContext(const LoadedModel& model) const;
  // OK when a request for `session` names no model or its model;
  // FAILED_PRECONDITION naming both otherwise.
  static absl::Status CheckSessionModel(const Session& session, const std::string& requested);
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
  // `target_name` is the model it drafts for (each target checks its own drafts).
  absl::StatusOr<std::shared_ptr<DraftModel>> LoadDraft(const std::string& path, const std::string& target_name,
                                                        const Tokenizer& target, uint32_t target_logits,
                                                        const std::string& backend);
  // A job's speculation: `draft` (may be null) with the daemon's settings
  // and the request's draft_max.
  JobDraft NewJobDraft(std::shared_ptr<DraftModel> draft, const GenerateJob& request) const;

  // scheduler.cc
  void SchedulerLoop();
  // The next pass's steps, all of `model`'s jobs; finishes cancelled jobs
  // and jobs the KV budget refuses (into `ended`, to finish outside mu_).
  std::vector<Step> BuildBatch(const LoadedModel* model,
                               std::vector<std::pair<std::shared_ptr<Job>, absl::Status>>& ended)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The model the next pass runs: the next one after the last pass's, in
  // name order, that has a job waiting (models take turns).
  std::shared_ptr<LoadedModel> NextPassModel() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Room in the KV budget for `extra` more bytes, evicting idle sessions when configured.
  bool MakeKvRoom(uint64_t extra) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t KvUsed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Embedding inputs' steps, after the generations': up to
  // embed_batch_tokens of them, each input's cache reserved whole when it
  // starts. One that cannot start waits while anything else runs, else ends
  // RESOURCE_EXHAUSTED (into `ended`).
  void AddEmbeddingSteps(const LoadedModel* model, std::vector<Step>& steps,
                         std::vector<std::pair<std::shared_ptr<Job>, absl::Status>>& ended)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Bytes the job's caches grow by for a step of `chunk` tokens and
  // `draft_nodes` draft tokens.
  uint64_t KvGrowth(Job& job, size_t chunk, int draft_nodes) const;
  void RunPass(LoadedModel& model, std::vector<Step>& steps);
  void EndJob(const std::shared_ptr<Job>& job, const absl::Status& status, const std::string& finish);

  const RuntimeOptions options_;
  const LayerStreamFactory factory_;
  const Clock::time_point started_ = Clock::now();
  // The options' residency: a model loads with it (its share of the
  // budgets), SetResidency changes a loaded model's own copy (--reset
  // returns to it).
  ResidencySettings configured_residency_;
  VramSettings configured_vram_;

  std::mutex load_mu_;
  std::mutex pass_mu_;
  std::atomic<int> control_waiting_{0};

  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::map<std::string, ModelSlot> models_ ABSL_GUARDED_BY(mu_);  // by canonical name
  uint64_t loads_ ABSL_GUARDED_BY(mu_) = 0;
  // A keep_alive changed: the scheduler looks at when models expire again.
  bool keep_alive_changed_ ABSL_GUARDED_BY(mu_) = false;
  std::string last_pass_model_ ABSL_GUARDED_BY(mu_);  // the model the last pass ran
  std::map<std::string, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);  // in arrival order
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t passes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generated_ ABSL_GUARDED_BY(mu_) = 0;
  Throughput throughput_ ABSL_GUARDED_BY(mu_);
  JobMetrics job_metrics_;  // its own lock

  // Speculative decoding.
  const SpeculationSettings speculation_;
  std::mutex drafts_mu_;  // after mu_ when both are held
  // By target and draft name (DraftKey): a draft is checked against its target's vocabulary.
  std::map<std::string, std::shared_ptr<DraftModel>> drafts_ ABSL_GUARDED_BY(drafts_mu_);
  SpeculationCounters spec_ ABSL_GUARDED_BY(mu_);
  std::optional<LoadProgress> loading_ ABSL_GUARDED_BY(mu_);

  std::vector<float> logits_;        // scheduler thread only
  std::vector<float> hidden_;        // likewise: embedding steps' hidden states
  std::vector<LogitCandidates> candidates_;  // likewise: the logits rows reduced, when the pass could
  std::vector<float> draft_logits_;  // likewise
  std::thread scheduler_;
  // When the pass in progress started (steady clock, ns); 0 between passes.
  std::atomic<int64_t> pass_started_ns_{0};
  // Raised by Shutdown before it joins the scheduler: a pass waiting on a
  // loader that makes no progress ends at once (layer_stream.h).
  const std::shared_ptr<StopSignal> stop_ = StopSignal::Create();
};

}  // namespace octo
