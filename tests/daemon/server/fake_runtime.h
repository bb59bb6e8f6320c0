// A scripted octo::Runtime for testing the gRPC skin and the clients
// without a model: jobs emit the script's tokens on a thread of their own
// (as the scheduler thread would), sessions and models are names in maps,
// and the fake records what it was asked so tests can check it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/runtime.h"

namespace octo::testing {

// What each submitted job does. A job cancelled through its JobHandle ends
// OK with finish_reason "cancelled"; one ended by Shutdown() ends
// UNAVAILABLE "octod is shutting down", as the core's jobs do.
struct FakeScript {
  std::vector<GeneratedToken> tokens;
  std::string finish_reason = "stop";
  std::string tail;
  JobStats stats;
  absl::Status failure;                     // not OK: the job fails with it after the tokens
  bool hold = false;                        // after the tokens, wait for Cancel or Shutdown
  std::chrono::milliseconds token_delay{0};
};

// Tokens whose texts are `pieces`, ids 100, 101, ...
std::vector<GeneratedToken> ScriptTokens(const std::vector<std::string>& pieces);

// A model summary with these fields (the rest zero).
ModelSummary FakeModel(const std::string& path, const std::string& architecture = "llama", uint32_t n_layers = 4);

class FakeRuntime final : public Runtime {
 public:
  FakeRuntime();
  ~FakeRuntime() override;  // cancels and joins every job

  void SetScript(FakeScript script);
  // Models ListModels offers; LoadModel accepts their paths. The first is
  // loaded when `load_first`.
  void SetModels(std::vector<ModelSummary> models, bool load_first);
  void SetReport(RuntimeReport report);  // what Report() returns (model and serving are the fake's own)

  // Observations.
  GenerateJob last_job();
  EmbedJob last_embed();
  int jobs_submitted();
  int jobs_cancelled();   // JobHandle::Cancel calls (first per job)
  int jobs_running();     // submitted and not yet done
  int sinks_alive();      // sinks not yet destroyed, by anyone
  std::vector<ResidencyChange> residency_changes();
  // Waits up to `timeout` for `predicate` over the fake; true when it held.
  bool WaitFor(const std::function<bool()>& predicate, std::chrono::milliseconds timeout = std::chrono::seconds(5));

  // Runtime.
  absl::StatusOr<ModelSummary> LoadModel(const std::string& path, const ModelSettings& settings) override;
  absl::Status UnloadModel(const std::string& name) override;
  absl::StatusOr<std::vector<ModelSummary>> ListModels() override;
  // Adds NAME to the models after two progress steps of 100 bytes; "taken"
  // when NAME is already one.
  absl::Status CreateModel(const std::string& name, const std::string& gguf, const CreateWatcher& watch) override;
  absl::Status CopyModel(const std::string& source, const std::string& destination) override;
  absl::Status DeleteModel(const std::string& name) override;
  absl::StatusOr<SessionReport> CreateSession(uint32_t context_length, const std::string& owner,
                                              const std::string& name = "", const std::string& model = "") override;
  absl::Status CloseSession(const std::string& id, const std::string& owner) override;
  absl::StatusOr<std::shared_ptr<JobHandle>> Submit(GenerateJob job, std::shared_ptr<TokenSink> sink) override;
  // Each input's embedding: {its tokens (Tokenize with BOS, or the ids
  // given), its first token, its last token, 0}, pooling "last";
  // "fail" as a text input fails the request with DATA_LOSS.
  absl::StatusOr<EmbedResult> Embed(const EmbedJob& job, const std::function<bool()>& cancelled) override;
  // One token per byte (id = the byte), BOS id 1 ("<s>") first when asked.
  absl::StatusOr<std::vector<int32_t>> Tokenize(const std::string& text, bool add_bos, bool parse_special,
                                                std::vector<std::string>* pieces) override;
  absl::StatusOr<std::string> Detokenize(const std::vector<int32_t>& tokens) override;
  // prompt_tokens as given; prompt text as Tokenize; messages as the bytes
  // of "role: content\n" per message, after BOS.
  absl::StatusOr<std::vector<int32_t>> PromptTokens(const GenerateJob& job) override;
  absl::StatusOr<ResidencyReport> SetResidency(const ResidencyChange& change) override;
  RuntimeReport Report() override;
  void Shutdown() override;

 private:
  struct Job;
  class Handle;
  // A job's life on its own thread; prompt_tokens: prompt bytes + token ids + messages.
  void Run(std::shared_ptr<Job> job, std::shared_ptr<TokenSink> sink, FakeScript script, std::string session_id,
           int prompt_tokens);

  absl::Mutex mu_;
  FakeScript script_ ABSL_GUARDED_BY(mu_);
  std::vector<ModelSummary> models_ ABSL_GUARDED_BY(mu_);
  std::optional<ModelSummary> loaded_ ABSL_GUARDED_BY(mu_);
  RuntimeReport report_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, SessionReport> sessions_ ABSL_GUARDED_BY(mu_);
  int next_session_ ABSL_GUARDED_BY(mu_) = 1;
  bool serving_ ABSL_GUARDED_BY(mu_) = true;
  GenerateJob last_job_ ABSL_GUARDED_BY(mu_);
  EmbedJob last_embed_ ABSL_GUARDED_BY(mu_);
  int submitted_ ABSL_GUARDED_BY(mu_) = 0;
  int cancelled_ ABSL_GUARDED_BY(mu_) = 0;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::weak_ptr<TokenSink>> sinks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
  std::vector<ResidencyChange> residency_changes_ ABSL_GUARDED_BY(mu_);
  ResidencyReport residency_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;  // guarded by mu_ too (joined in the destructor)
};

}  // namespace octo::testing
