#include "tests/daemon/server/fake_runtime.h"

#include "absl/strings/str_cat.h"
#include "daemon/sampling/sampling_params.h"
#include "storage/status_macros.h"

namespace octo::testing {

struct FakeRuntime::Job {
  absl::Mutex mu;
  bool cancelled ABSL_GUARDED_BY(mu) = false;
};

class FakeRuntime::Handle final : public JobHandle {
 public:
  Handle(FakeRuntime* runtime, std::shared_ptr<Job> job) : runtime_(runtime), job_(std::move(job)) {}
  void Cancel() override {
    {
      absl::MutexLock lock(&job_->mu);
      if (job_->cancelled) return;
      job_->cancelled = true;
    }
    absl::MutexLock lock(&runtime_->mu_);
    ++runtime_->cancelled_;
  }

 private:
  FakeRuntime* runtime_;
  std::shared_ptr<Job> job_;
};

std::vector<GeneratedToken> ScriptTokens(const std::vector<std::string>& pieces) {
  std::vector<GeneratedToken> tokens;
  for (size_t i = 0; i < pieces.size(); ++i) {
    GeneratedToken token;
    token.id = static_cast<int32_t>(100 + i);
    token.text = pieces[i];
    token.logprob = -0.25 * static_cast<double>(i + 1);
    token.top = {{token.id, token.logprob, "a"}, {7, -3.5, "b"}};
    tokens.push_back(std::move(token));
  }
  return tokens;
}

ModelSummary FakeModel(const std::string& path, const std::string& architecture, uint32_t n_layers) {
  ModelSummary model;
  model.path = path;
  model.name = path;
  model.architecture = architecture;
  model.n_layers = n_layers;
  model.dim = 64;
  model.vocab_size = 256;
  model.context_length = 4096;
  model.total_bytes = 3ull << 20;
  return model;
}

FakeRuntime::FakeRuntime() {
  script_.tokens = ScriptTokens({"Hello", ",", " world"});
}

FakeRuntime::~FakeRuntime() {
  Shutdown();
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    threads.swap(threads_);
  }
  for (std::thread& thread : threads) thread.join();
}

void FakeRuntime::SetScript(FakeScript script) {
  absl::MutexLock lock(&mu_);
  script_ = std::move(script);
}

void FakeRuntime::SetModels(std::vector<ModelSummary> models, bool load_first) {
  absl::MutexLock lock(&mu_);
  models_ = std::move(models);
  loaded_.reset();
  if (load_first && !models_.empty()) {
    loaded_ = models_.front();
    loaded_->loaded = true;
  }
}

void FakeRuntime::SetReport(RuntimeReport report) {
  absl::MutexLock lock(&mu_);
  report_ = std::move(report);
}

GenerateJob FakeRuntime::last_job() {
  absl::MutexLock lock(&mu_);
  return last_job_;
}

int FakeRuntime::jobs_submitted() {
  absl::MutexLock lock(&mu_);
  return submitted_;
}

int FakeRuntime::jobs_cancelled() {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

int FakeRuntime::jobs_running() {
  absl::MutexLock lock(&mu_);
  return running_;
}

int FakeRuntime::sinks_alive() {
  absl::MutexLock lock(&mu_);
  int alive = 0;
  for (const std::weak_ptr<TokenSink>& sink : sinks_) alive += sink.expired() ? 0 : 1;
  return alive;
}

std::vector<ResidencyChange> FakeRuntime::residency_changes() {
  absl::MutexLock lock(&mu_);
  return residency_changes_;
}

bool FakeRuntime::WaitFor(const std::function<bool()>& predicate, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

absl::StatusOr<ModelSummary> FakeRuntime::LoadModel(const std::string& path, const ModelSettings&) {
  absl::MutexLock lock(&mu_);
  if (running_ > 0) return absl::FailedPreconditionError("a job is running");
  for (const ModelSummary& model : models_) {
    if (model.path == path) {
      loaded_ = model;
      loaded_->loaded = true;
      return *loaded_;
    }
  }
  return absl::NotFoundError(absl::StrCat("no model '", path, "' under the models root"));
}

absl::Status FakeRuntime::UnloadModel(const std::string& name) {
  absl::MutexLock lock(&mu_);
  if (!loaded_.has_value()) return absl::FailedPreconditionError("no model loaded");
  if (!name.empty() && name != loaded_->path) return absl::NotFoundError("model '" + name + "' is not loaded");
  loaded_.reset();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ModelSummary>> FakeRuntime::ListModels() {
  absl::MutexLock lock(&mu_);
  std::vector<ModelSummary> models = models_;
  for (ModelSummary& model : models) model.loaded = loaded_.has_value() && loaded_->path == model.path;
  return models;
}

absl::Status FakeRuntime::CreateModel(const std::string& name, const std::string& gguf, const CreateWatcher& watch) {
  {
    absl::MutexLock lock(&mu_);
    for (const ModelSummary& model : models_) {
      if (model.path == name) return absl::AlreadyExistsError(absl::StrCat("model '", name, "' exists"));
    }
  }
  for (uint64_t done : {100, 200}) {
    if (watch) {
      watch(LoadProgress{.model = name, .stage = "decomposing", .bytes_done = done, .bytes_total = 200, .seconds = 0});
    }
  }
  absl::MutexLock lock(&mu_);
  ModelSummary created;
  created.path = name;
  created.architecture = "llama";
  created.name = gguf;
  created.n_layers = 2;
  models_.push_back(created);
  return absl::OkStatus();
}

absl::Status FakeRuntime::CopyModel(const std::string& source, const std::string& destination) {
  absl::MutexLock lock(&mu_);
  const ModelSummary* from = nullptr;
  for (const ModelSummary& model : models_) {
    if (model.path == destination) return absl::AlreadyExistsError(absl::StrCat("model '", destination, "' exists"));
    if (model.path == source) from = &model;
  }
  if (from == nullptr) return absl::NotFoundError(absl::StrCat("no model '", source, "'"));
  ModelSummary copy = *from;
  copy.path = destination;
  models_.push_back(copy);
  return absl::OkStatus();
}

absl::Status FakeRuntime::DeleteModel(const std::string& name) {
  absl::MutexLock lock(&mu_);
  if (loaded_.has_value() && loaded_->path == name) return absl::FailedPreconditionError(name + " is loaded");
  for (auto it = models_.begin(); it != models_.end(); ++it) {
    if (it->path == name) {
      models_.erase(it);
      return absl::OkStatus();
    }
  }
  return absl::NotFoundError(absl::StrCat("no model '", name, "'"));
}

absl::StatusOr<SessionReport> FakeRuntime::CreateSession(uint32_t context_length, const std::string& owner,
                                                         const std::string& name, const std::string& /*model*/) {
  absl::MutexLock lock(&mu_);
  if (!loaded_.has_value()) return absl::FailedPreconditionError("no model loaded");
  if (context_length > 1u << 20) return absl::InvalidArgumentError("context_length is above the model's");
  if (auto it = sessions_.find(name); !name.empty() && it != sessions_.end()) return it->second;
  SessionReport session;
  session.id = name.empty() ? absl::StrCat("session-", next_session_++) : name;
  session.created = true;
  session.owner = owner;
  session.context_length = context_length == 0 ? 4096 : context_length;
  sessions_[session.id] = session;
  return session;
}

absl::Status FakeRuntime::CloseSession(const std::string& id, const std::string& owner) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.owner != owner) return absl::NotFoundError(absl::StrCat("no session '", id, "'"));
  sessions_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<JobHandle>> FakeRuntime::Submit(GenerateJob job, std::shared_ptr<TokenSink> sink) {
  OCTO_RETURN_IF_ERROR(ValidateSamplingParams(job.sampling));
  absl::MutexLock lock(&mu_);
  if (!serving_) return absl::UnavailableError("octod is shutting down");
  if (!loaded_.has_value()) return absl::FailedPreconditionError("no model loaded");
  if (!job.model.empty() && job.model != loaded_->path) {
    return absl::FailedPreconditionError(absl::StrCat("model '", job.model, "' is not loaded"));
  }
  if (job.prompt.empty() && job.prompt_tokens.empty() && job.messages.empty()) {
    return absl::InvalidArgumentError("the prompt is empty");
  }
  if (!job.session_id.empty() && sessions_.count(job.session_id) == 0) {
    return absl::NotFoundError(absl::StrCat("no session '", job.session_id, "'"));
  }
  last_job_ = job;
  ++submitted_;
  ++running_;
  sinks_.push_back(sink);
  auto state = std::make_shared<Job>();
  jobs_.push_back(state);
  const int prompt_tokens = static_cast<int>(job.prompt.size() + job.prompt_tokens.size() + job.messages.size());
  threads_.emplace_back(&FakeRuntime::Run, this, state, std::move(sink), script_, job.session_id, prompt_tokens);
  return std::shared_ptr<JobHandle>(std::make_shared<Handle>(this, state));
}

void FakeRuntime::Run(std::shared_ptr<Job> job, std::shared_ptr<TokenSink> sink, FakeScript script,
                      std::string session_id, int prompt_tokens) {
  auto cancelled = [&] {
    absl::MutexLock lock(&job->mu);
    return job->cancelled;
  };
  sink->OnStarted(session_id, prompt_tokens);
  for (const GeneratedToken& token : script.tokens) {
    if (cancelled()) break;
    std::this_thread::sleep_for(script.token_delay);
    sink->OnToken(token);
  }
  if (script.hold) {
    absl::MutexLock lock(&job->mu);
    job->mu.Await(absl::Condition(&job->cancelled));
  }
  JobStats stats = script.stats;
  stats.generated_tokens = static_cast<int>(script.tokens.size());
  bool stopping;
  {
    absl::MutexLock lock(&mu_);
    stopping = !serving_;
  }
  if (stopping) {
    sink->OnDone(absl::UnavailableError("octod is shutting down"), "cancelled", "", stats);  // as the core does
  } else if (cancelled()) {
    sink->OnDone(absl::OkStatus(), "cancelled", "", stats);
  } else {
    sink->OnDone(script.failure, script.finish_reason, script.tail, stats);
  }
  sink.reset();  // the job is over: the runtime lets go of its sink
  absl::MutexLock lock(&mu_);
  --running_;
}

EmbedJob FakeRuntime::last_embed() {
  absl::MutexLock lock(&mu_);
  return last_embed_;
}

absl::StatusOr<EmbedResult> FakeRuntime::Embed(const EmbedJob& job, const std::function<bool()>&) {
  {
    absl::MutexLock lock(&mu_);
    last_embed_ = job;
    if (!loaded_.has_value()) return absl::FailedPreconditionError("no model is loaded");
  }
  if (job.texts.empty() == job.token_inputs.empty()) {
    return absl::InvalidArgumentError("input: give texts or token lists, one of them");
  }
  EmbedResult result{.model = "fake", .pooling = "last"};
  const size_t n = job.texts.size() + job.token_inputs.size();
  for (size_t i = 0; i < n; ++i) {
    if (!job.texts.empty() && job.texts[i] == "fail") return absl::DataLossError("layer_001.bin: checksum mismatch");
    std::vector<int32_t> tokens = job.token_inputs.empty() ? *Tokenize(job.texts[i], true, false, nullptr)
                                                           : job.token_inputs[i];
    if (tokens.empty()) return absl::InvalidArgumentError(absl::StrCat("input[", i, "] is empty"));
    result.embeddings.push_back({static_cast<float>(tokens.size()), static_cast<float>(tokens.front()),
                                 static_cast<float>(tokens.back()), 0.0f});
    result.input_tokens.push_back(static_cast<int>(tokens.size()));
    result.prompt_tokens += static_cast<int>(tokens.size());
  }
  return result;
}

absl::StatusOr<std::vector<int32_t>> FakeRuntime::Tokenize(const std::string& text, bool add_bos, bool,
                                                           std::vector<std::string>* pieces) {
  std::vector<int32_t> tokens;
  if (add_bos) {
    tokens.push_back(1);
    if (pieces != nullptr) pieces->push_back("<s>");
  }
  for (unsigned char c : text) {
    tokens.push_back(c);
    if (pieces != nullptr) pieces->push_back(std::string(1, static_cast<char>(c)));
  }
  return tokens;
}

absl::StatusOr<std::string> FakeRuntime::Detokenize(const std::vector<int32_t>& tokens) {
  std::string text;
  for (int32_t token : tokens) {
    if (token < 0 || token > 255) return absl::InvalidArgumentError(absl::StrCat("token ", token, " is not in the vocabulary"));
    text.push_back(static_cast<char>(token));
  }
  return text;
}

absl::StatusOr<std::vector<int32_t>> FakeRuntime::PromptTokens(const GenerateJob& job) {
  if (!job.prompt_tokens.empty()) return job.prompt_tokens;
  std::vector<std::string> pieces;
  if (job.messages.empty()) return Tokenize(job.prompt, job.add_bos, job.parse_special, &pieces);
  std::string text;
  for (const ChatMessage& message : job.messages) absl::StrAppend(&text, message.role, ": ", message.content, "\n");
  return Tokenize(text, /*add_bos=*/true, /*parse_special=*/true, &pieces);
}

absl::StatusOr<ResidencyReport> FakeRuntime::SetResidency(const ResidencyChange& change) {
  absl::MutexLock lock(&mu_);
  if (change.budget_bytes == 0u && !change.auto_budget.value_or(false)) {
    return absl::InvalidArgumentError("budget_bytes 0 without auto_budget");
  }
  residency_changes_.push_back(change);
  if (change.pin_first) residency_.pin_first = *change.pin_first;
  if (change.pin_last) residency_.pin_last = *change.pin_last;
  if (change.budget_bytes) residency_.budget_bytes = *change.budget_bytes;
  if (change.auto_budget) residency_.auto_budget = *change.auto_budget;
  if (change.vram_budget_bytes) residency_.device.budget_bytes = *change.vram_budget_bytes;
  if (change.vram_auto) residency_.device.auto_budget = *change.vram_auto;
  return residency_;
}

RuntimeReport FakeRuntime::Report() {
  absl::MutexLock lock(&mu_);
  RuntimeReport report = report_;
  report.model = loaded_;
  if (loaded_.has_value()) {
    LoadedModelReport& model = report.models.emplace_back();
    model.summary = *loaded_;
    model.is_default = true;
  }
  report.serving = serving_;
  for (const auto& [id, session] : sessions_) report.sessions.push_back(session);
  return report;
}

void FakeRuntime::Shutdown() {
  std::vector<std::shared_ptr<Job>> jobs;
  {
    absl::MutexLock lock(&mu_);
    serving_ = false;
    jobs = jobs_;
  }
  for (const std::shared_ptr<Job>& job : jobs) {
    absl::MutexLock lock(&job->mu);
    job->cancelled = true;  // shutdown: "cancelled" as the core does, not counted as a client's cancel
  }
}

}  // namespace octo::testing
