#include "daemon/core/runtime_impl.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/core/model_name.h"
#include "daemon/core/model_paths.h"
#include "daemon/core/session_id.h"
#include "daemon/grammar/think_first.h"
#include "storage/bounded_json.h"
#include "storage/byte_size.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

// Half of MemAvailable: what auto mode fills when the config names no size.
uint64_t DefaultAutoBudget() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024 / 2;
  }
  return 4ull << 30;
}

absl::Status ValidateOptions(const RuntimeOptions& o) {
  if (o.models_root.empty()) return absl::InvalidArgumentError("models_root is not set");
  if (o.ring_slots < 1 || o.ring_slots > kMaxRingSlots) {
    return absl::InvalidArgumentError(absl::StrCat("ring_slots is ", o.ring_slots, "; it must be 1..", kMaxRingSlots));
  }
  if (o.session_context < 1) return absl::InvalidArgumentError("session_context must be at least 1");
  if (o.max_sessions < 1) return absl::InvalidArgumentError("max_sessions must be at least 1");
  if (o.prefill_chunk < 1) return absl::InvalidArgumentError("prefill_chunk must be at least 1");
  if (o.embed_batch_tokens < 1) return absl::InvalidArgumentError("embed_batch_tokens must be at least 1");
  if (o.kv_budget_bytes == 0) return absl::InvalidArgumentError("kv_budget must be more than 0 bytes");
  if (o.max_loaded_models < 1) return absl::InvalidArgumentError("max_loaded_models must be at least 1");
  if (o.keep_alive < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("keep_alive must not be negative (infinite: until room is needed)");
  }
  return ValidateSpeculation(o.speculation);
}

}  // namespace

RuntimeImpl::RuntimeImpl(const RuntimeOptions& options, LayerStreamFactory factory)
    : options_(options), factory_(std::move(factory)), speculation_(options.speculation) {
  ResidencySettings& r = configured_residency_;
  r.pin_first = options.pin_first;
  r.pin_last = options.pin_last;
  r.auto_budget = options.layer_budget_bytes == 0;
  r.budget_bytes = options.layer_budget_bytes;
  r.auto_budget_bytes = options.auto_budget_bytes > 0 ? options.auto_budget_bytes : DefaultAutoBudget();
  r.ring_slots = options.ring_slots;
  r.expert_cache_bytes = options.expert_cache_bytes;
  VramSettings& v = configured_vram_;
  v.auto_budget = options.vram_budget_bytes == 0;
  v.budget_bytes = options.vram_budget_bytes;
  v.staging_buffers = options.staging_buffers;
  v.cuda_graphs = options.cuda_graphs;
  v.kv_budget_bytes = options.kv_budget_bytes;
  // A pass's rows: the generations' (at least kMinPassTokens) and embedding inputs' beside them.
  v.pass_rows = static_cast<int>(std::max<uint32_t>(kMinPassTokens, options.prefill_chunk) +
                                 options.embed_batch_tokens);
}

absl::StatusOr<std::unique_ptr<RuntimeImpl>> RuntimeImpl::Create(const RuntimeOptions& options,
                                                                 LayerStreamFactory factory) {
  OCTO_RETURN_IF_ERROR(ValidateOptions(options));
  // The backend asked for must exist before anything loads.
  OCTO_RETURN_IF_ERROR(CreateBackend(BackendChoice{.kind = options.backend, .gpu = options.gpu, .n_threads = 1})
                           .status());
  std::unique_ptr<RuntimeImpl> r(new RuntimeImpl(options, std::move(factory)));
  if (!options.model.empty()) OCTO_RETURN_IF_ERROR(r->LoadModel(options.model, {}).status());
  r->scheduler_ = std::thread([p = r.get()] { p->SchedulerLoop(); });
  return r;
}

RuntimeImpl::~RuntimeImpl() { Shutdown(); }

ModelSummary RuntimeImpl::Summary(const LoadedModel& model) {
  ModelSummary summary = model.summary();
  if (const ModelSlot* slot = SlotOf(model); slot != nullptr && slot->draft != nullptr) {
    summary.draft_model = slot->draft->path();
  }
  return summary;
}

std::string RuntimeImpl::NewSessionId() {
  // 128 bits from the kernel's generator (std::random_device reads
  // /dev/urandom or getrandom): an id cannot be guessed.
  std::random_device random;
  uint64_t words[2];
  for (uint64_t& word : words) word = (uint64_t{random()} << 32) | random();
  return absl::StrFormat("s%016x%016x", words[0], words[1]);
}

namespace {

// Sessions and generation need a model that gives logits: not an encoder.
absl::Status CheckGenerates(const LoadedModel& m) {
  if (!IsEncoderArchitecture(m.config().architecture)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("model '", m.summary().path, "' is an embedding model (",
                                                 m.config().architecture,
                                                 "): it embeds (/v1/embeddings, /api/embed, octo-gen --embed) "
                                                 "and cannot generate text"));
}

absl::Status CheckSessionName(absl::string_view name) {
  const bool plain = std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-';
  });
  if (name.size() > kMaxSessionIdBytes || !plain || IsGeneratedSessionId(name)) {
    return absl::InvalidArgumentError(absl::StrCat("session name ", QuotePrefix(name), " must be 1..",
                                                   kMaxSessionIdBytes, " letters, digits, '.', '_' or '-'"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string RuntimeImpl::SessionKey(const std::string& id, const std::string& owner) {
  // A random id is unique on its own; a name only within its owner's.
  return IsGeneratedSessionId(id) ? id : absl::StrCat("\x1f", owner, "\x1f", id);
}

void RuntimeImpl::CloseIdleSessions() {
  if (options_.session_idle_timeout <= absl::ZeroDuration()) return;
  const auto now = Clock::now();
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    const Session& s = *it->second;
    const bool idle = !s.busy && !s.temporary && absl::FromChrono(now - s.last_used) > options_.session_idle_timeout;
    it = idle ? sessions_.erase(it) : std::next(it);
  }
}

absl::StatusOr<SessionReport> RuntimeImpl::CreateSession(uint32_t context_length, const std::string& owner,
                                                         const std::string& name, const std::string& model_name) {
  if (!name.empty()) OCTO_RETURN_IF_ERROR(CheckSessionName(name));
  OCTO_ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> m, ModelFor(model_name, /*load=*/true));
  OCTO_RETURN_IF_ERROR(CheckGenerates(*m));
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return absl::UnavailableError("octod is shutting down");
  CloseIdleSessions();
  SessionReport report;
  report.owner = owner;
  if (!name.empty()) {
    if (auto it = sessions_.find(SessionKey(name, owner)); it != sessions_.end()) {
      OCTO_RETURN_IF_ERROR(CheckSessionModel(*it->second, model_name));
      report.id = name;
      report.model = it->second->model->summary().path;
      report.context_length = static_cast<uint32_t>(it->second->kv->max_positions());
      report.positions = static_cast<uint32_t>(it->second->kv->size());
      return report;
    }
  }
  if (SessionsHeld() >= options_.max_sessions) {
    return absl::ResourceExhaustedError(absl::StrCat("the daemon holds ", SessionsHeld(),
                                                     " sessions, its max_sessions; close one first"));
  }
  if (SlotOf(*m) == nullptr) {
    return absl::AbortedError("the model was unloaded while the session was being opened; open it again");
  }
  auto session = std::make_shared<Session>();
  session->id = name.empty() ? NewSessionId() : name;
  session->named = !name.empty();
  session->owner = owner;
  session->model = m;
  session->kv = m->NewCache(SessionContext(context_length, *m));
  sessions_[SessionKey(session->id, owner)] = session;
  report.id = session->id;
  report.model = m->summary().path;
  report.created = true;
  report.context_length = static_cast<uint32_t>(session->kv->max_positions());
  return report;
}

absl::Status RuntimeImpl::CloseSession(const std::string& id, const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(SessionKey(id, owner));
  // Another credential's session is as good as absent: its existence is not told.
  if (it == sessions_.end() || it->second->temporary || it->second->owner != owner) {
    return absl::NotFoundError(absl::StrCat("no session '", id.substr(0, kMaxSessionIdBytes), "'"));
  }
  // A job running in it is cancelled; the job holds the session until it ends.
  for (const std::shared_ptr<Job>& job : jobs_) {
    if (&job->session() == it->second.get()) job->Cancel();
  }
  sessions_.erase(it);
  work_cv_.notify_all();
  return absl::OkStatus();
}

absl::Status RuntimeImpl::CheckSessionModel(const Session& session, const std::string& requested) {
  const std::string& path = session.model->summary().path;
  if (requested.empty() || CanonicalModelName(requested) == path) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("session '", session.id, "' belongs to model '", path,
                                                    "', not ", QuotePrefix(requested)));
}

absl::StatusOr<std::shared_ptr<JobHandle>> RuntimeImpl::Submit(GenerateJob request, std::shared_ptr<TokenSink> sink) {
  OCTO_RETURN_IF_ERROR(ValidateJob(request));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("octod is shutting down");
  }
  // A session's job runs on the session's model; a one-shot job on the one
  // it names (loaded now when it is not) or the default.
  std::shared_ptr<LoadedModel> m;
  if (request.session_id.empty()) {
    OCTO_ASSIGN_OR_RETURN(m, ModelFor(request.model, /*load=*/true, request.keep_alive));
    OCTO_RETURN_IF_ERROR(CheckGenerates(*m));
  }
  std::shared_ptr<Session> session;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("octod is shutting down");
    CloseIdleSessions();
    if (!request.session_id.empty()) {
      auto it = sessions_.find(SessionKey(request.session_id, request.owner));
      if (it == sessions_.end() || it->second->temporary || it->second->owner != request.owner) {
        return absl::NotFoundError(absl::StrCat("no session '", request.session_id, "'"));
      }
      session = it->second;
      OCTO_RETURN_IF_ERROR(CheckSessionModel(*session, request.model));
      m = session->model;
      if (ModelSlot* slot = SlotOf(*m); slot != nullptr) {
        slot->last_used = Clock::now();
        if (request.keep_alive.has_value()) slot->keep_alive = *request.keep_alive;
      }
      if (session->busy) {
        return absl::FailedPreconditionError(absl::StrCat("session '", request.session_id,
                                                          "' is already generating"));
      }
      session->busy = true;
    } else {
      if (SessionsHeld() >= options_.max_sessions) {
        return absl::ResourceExhaustedError(absl::StrCat("the daemon holds ", SessionsHeld(),
                                                         " sessions, its max_sessions"));
      }
      session = std::make_shared<Session>();
      session->id = NewSessionId();
      session->owner = request.owner;
      session->temporary = true;
      session->busy = true;
      session->model = m;
      session->kv = m->NewCache(OneShotContext(request, *m));
    }
  }
  // Tokenizing happens here, on the caller's thread, not the scheduler's.
  auto release = [&](const absl::Status& status) {
    std::lock_guard<std::mutex> lock(mu_);
    session->busy = false;
    return status;
  };
  std::vector<ChatMessage> new_messages;
  absl::StatusOr<std::vector<int32_t>> prompt = JobPromptTokens(request, *session, *m, &new_messages);
  if (!prompt.ok()) return release(prompt.status());
  if (session->temporary) TruncateAsOllama(request, session->kv->max_positions(), *prompt);
  if (static_cast<int64_t>(prompt->size()) > session->kv->max_positions()) {
    return release(ContextTooSmall(prompt->size(), *session, *m));
  }
  // Reuse the longest prefix the cache already holds; feed at least one token.
  const std::vector<int32_t>& held = session->tokens;
  size_t cached = 0;
  const size_t limit = std::min<size_t>(session->kv->size(), prompt->size() - 1);
  while (cached < limit && cached < held.size() && held[cached] == (*prompt)[cached]) ++cached;
  // A hybrid model's recurrent state is reusable only whole or from its
  // turn snapshot, never from a prefix it did not end at.
  cached = static_cast<size_t>(session->kv->ReusablePrefix(static_cast<int>(cached)));
  absl::StatusOr<Generation> generation =
      Generation::Create(m->tokenizer(), request.sampling, std::move(*prompt), session->kv->max_positions());
  if (!generation.ok()) return release(generation.status());
  if (!request.grammar.empty()) {
    absl::StatusOr<Grammar> grammar = Grammar::Parse(request.grammar);
    if (!grammar.ok()) return release(Annotate(grammar.status(), "grammar"));
    // A reasoning model thinks first; the constraint holds after its thought
    // (unless the grammar writes the thought itself).
    if (m->summary().thinks && !absl::StrContains(request.grammar, kThinkOpen)) {
      grammar = ThinkFirst(*std::move(grammar));
    }
    generation->Constrain(std::make_shared<const Grammar>(*std::move(grammar)), m->grammar_vocab());
  }
  generation->InputFed(cached);
  if (absl::Status truncated = session->kv->Truncate(static_cast<int>(cached)); !truncated.ok()) {
    return release(truncated);
  }
  // Speculation: the request's draft model, or the daemon's. The session
  // keeps its draft cache for the same draft (cut to the reused prefix),
  // else gets a new one (or none).
  absl::StatusOr<std::shared_ptr<DraftModel>> draft = ResolveDraft(request, *m);
  if (!draft.ok()) return release(draft.status());
  const bool new_draft = session->draft != *draft;
  std::unique_ptr<KvCache> draft_kv;
  if (*draft != nullptr && new_draft) {
    draft_kv = (*draft)->model().NewCache(session->kv->max_positions() + kMaxDraftTreeNodes);
  } else if (*draft != nullptr) {
    KvCache& held = *session->draft_kv;
    const int keep = held.ReusablePrefix(std::min(held.size(), static_cast<int>(cached)));
    if (absl::Status truncated = held.Truncate(keep); !truncated.ok()) return release(truncated);
  }
  auto job = std::make_shared<Job>(session, std::move(*generation), std::move(sink), std::move(new_messages),
                                   static_cast<int>(cached));
  job->draft() = NewJobDraft(*draft, request);
  job->stats().draft_model = *draft != nullptr ? (*draft)->path() : "";
  job->origin() = request.origin;
  job->model() = m->summary().path;
  std::lock_guard<std::mutex> lock(mu_);
  if (new_draft) {
    session->draft = *draft;
    session->draft_kv = std::move(draft_kv);
  }
  if (stopping_) {
    session->busy = false;
    return absl::UnavailableError("octod is shutting down");
  }
  // An unload (or a load of it again) between ModelFor above and here must
  // not get a job whose cache and tokens belong to the old model.
  if (SlotOf(*m) == nullptr) {
    session->busy = false;
    return absl::AbortedError("the model was loaded or unloaded while this job was being prepared; send it again");
  }
  if (session->temporary) sessions_[session->id] = session;
  jobs_.push_back(job);
  work_cv_.notify_all();
  return std::static_pointer_cast<JobHandle>(job);
}

absl::StatusOr<std::vector<int32_t>> RuntimeImpl::Tokenize(const std::string& text, bool add_bos, bool parse_special,
                                                           std::vector<std::string>* pieces) {
  if (text.size() > kMaxPromptBytes) {
    return absl::InvalidArgumentError(absl::StrCat("text is ", text.size(), " bytes; the limit is ", kMaxPromptBytes));
  }
  std::shared_ptr<LoadedModel> m = model();
  if (m == nullptr) return absl::FailedPreconditionError("no model is loaded");
  std::vector<int32_t> tokens = m->tokenizer().Encode(text, add_bos, parse_special);
  if (pieces != nullptr) {
    for (int32_t t : tokens) pieces->push_back(m->tokenizer().Piece(t, /*render_special=*/true));
  }
  return tokens;
}

absl::StatusOr<std::string> RuntimeImpl::Detokenize(const std::vector<int32_t>& tokens) {
  std::shared_ptr<LoadedModel> m = model();
  if (m == nullptr) return absl::FailedPreconditionError("no model is loaded");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= m->tokenizer().vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat("token ", i, " (", tokens[i], ") is outside the vocabulary (",
                                                     m->tokenizer().vocab_size(), " tokens)"));
    }
  }
  return m->tokenizer().Decode(tokens, /*render_special=*/false);
}

absl::StatusOr<std::vector<int32_t>> RuntimeImpl::PromptTokens(const GenerateJob& job) {
  OCTO_RETURN_IF_ERROR(ValidateJob(job));
  OCTO_ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> m, ModelFor(job.model, /*load=*/true));
  std::vector<ChatMessage> new_messages;
  return JobPromptTokens(job, Session{}, *m, &new_messages);
}

absl::StatusOr<ResidencyReport> RuntimeImpl::SetResidency(const ResidencyChange& change) {
  std::lock_guard<std::mutex> load(load_mu_);
  ControlScope control(*this);
  std::shared_ptr<LoadedModel> m;
  ResidencySettings next = configured_residency_;
  VramSettings next_vram = configured_vram_;
  uint64_t others_held = 0;  // the other models' layers: this one's budget shares the configured one with them
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!change.model.empty() || !models_.empty()) {
      const std::string name = change.model.empty() ? DefaultModel()->summary().path : CanonicalModelName(change.model);
      auto it = models_.find(name);
      if (it == models_.end()) {
        return absl::NotFoundError(
            absl::StrCat("model ", QuotePrefix(change.model), " is not loaded (loaded: ", LoadedNames(), ")"));
      }
      m = it->second.model;
      if (!change.reset) {
        next = it->second.residency;
        next_vram = it->second.vram;
      }
      for (const auto& [other, slot] : models_) {
        if (other != name) others_held += slot.model->residency().Report().held_bytes;
      }
    }
  }
  if (change.pin_first.has_value()) next.pin_first = *change.pin_first;
  if (change.pin_last.has_value()) next.pin_last = *change.pin_last;
  if (change.budget_bytes.has_value()) {
    next.budget_bytes = *change.budget_bytes;
    next.auto_budget = false;
  }
  if (change.auto_budget.has_value()) next.auto_budget = *change.auto_budget;
  if (change.expert_cache_bytes.has_value()) next.expert_cache_bytes = *change.expert_cache_bytes;
  if (!next.auto_budget && next.budget_bytes == 0) {
    return absl::InvalidArgumentError("budget_bytes must be set (more than 0) when auto_budget is off");
  }
  if (others_held > 0) {
    // Beside other models, the auto budget is what they leave of the
    // configured one, and an explicit one may not take more.
    const uint64_t total = configured_residency_.budget();
    const uint64_t left = total > others_held ? total - others_held : 0;
    if (next.auto_budget) {
      next.auto_budget_bytes = std::min(next.auto_budget_bytes, left);
    } else if (next.budget_bytes > left) {
      return absl::FailedPreconditionError(absl::StrCat(
          "a layer budget of ", FormatByteSize(next.budget_bytes), " does not fit beside the other loaded models: they hold ",
          FormatByteSize(others_held), " of ", FormatByteSize(total), "; ask at most ", FormatByteSize(left),
          " or unload one"));
    }
  }
  VramSettings& vram = next_vram;
  if (change.vram_budget_bytes.has_value()) {
    vram.budget_bytes = *change.vram_budget_bytes;
    vram.auto_budget = false;
  }
  if (change.vram_auto.has_value()) vram.auto_budget = *change.vram_auto;
  if (!vram.auto_budget && vram.budget_bytes == 0) {
    return absl::InvalidArgumentError("vram_budget_bytes must be set (more than 0) when the VRAM budget is not auto");
  }
  if (m == nullptr) {
    // No model loaded: the settings the next load starts from.
    configured_residency_ = next;
    configured_vram_ = next_vram;
    ResidencyReport report;
    report.pin_first = next.pin_first;
    report.pin_last = next.pin_last;
    report.auto_budget = next.auto_budget;
    report.budget_bytes = next.budget();
    return report;
  }
  OCTO_RETURN_IF_ERROR(m->ApplyResidency(next, next_vram));
  if (const std::string notice = m->PinNotice(); !notice.empty()) Log(absl::StrCat(m->summary().path, ": ", notice));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ModelSlot* slot = SlotOf(*m); slot != nullptr) {
      slot->residency = next;
      slot->vram = next_vram;
    }
  }
  ResidencyReport report = m->residency().Report();
  report.global_bytes = m->global_bytes();
  std::vector<LayerReport> layers = m->residency().LayerReports();
  m->AddDeviceReport(report, layers);
  return report;
}

absl::Duration RuntimeImpl::PassSilence() {
  const int64_t started = pass_started_ns_.load(std::memory_order_relaxed);
  if (started == 0) return absl::ZeroDuration();
  int64_t last = started;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, slot] : models_) last = std::max(last, slot.model->residency().last_activity_ns());
  return absl::Nanoseconds(std::chrono::steady_clock::now().time_since_epoch().count() - last);
}

void RuntimeImpl::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !scheduler_.joinable()) return;
    stopping_ = true;
    for (const std::shared_ptr<Job>& job : jobs_) job->Cancel();
  }
  stop_->Raise();
  work_cv_.notify_all();
  if (scheduler_.joinable()) scheduler_.join();
  std::deque<std::shared_ptr<Job>> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(jobs_);
  }
  for (const std::shared_ptr<Job>& job : left) {
    EndJob(job, absl::UnavailableError("octod is shutting down"), "cancelled");
  }
  std::lock_guard<std::mutex> pass(pass_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.clear();
  models_.clear();  // stops the loaders and removes the rings' shared memory
  std::lock_guard<std::mutex> drafts(drafts_mu_);
  drafts_.clear();
}

}  // namespace octo
