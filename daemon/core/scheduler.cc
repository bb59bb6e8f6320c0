// The scheduler: one thread that batches the next step of every running job
// into each forward pass, so one walk over the weights (one read of each
// streamed layer) serves every session at once.
#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/core/runtime_impl.h"

namespace octo {

void RuntimeImpl::SchedulerLoop() {
  while (true) {
    std::vector<Step> steps;
    std::vector<std::pair<std::shared_ptr<Job>, absl::Status>> ended;
    std::shared_ptr<LoadedModel> m;
    std::unique_lock<std::mutex> pass(pass_mu_, std::defer_lock);
    // Between passes: models idle past their keep_alive go.
    const Clock::time_point next_expiry = UnloadExpiredModels();
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Control operations (residency, a model loaded again) go first: they wait on pass_mu_.
      auto ready = [&] {
        return stopping_ || keep_alive_changed_ || (!jobs_.empty() && control_waiting_.load() == 0);
      };
      if (next_expiry == Clock::time_point::max()) {
        work_cv_.wait(lock, ready);
      } else if (!work_cv_.wait_until(lock, next_expiry, ready)) {
        continue;  // a keep_alive ran out
      }
      if (keep_alive_changed_ && !stopping_) {
        keep_alive_changed_ = false;
        continue;  // when models expire has changed: look again
      }
      if (stopping_) return;
      lock.unlock();
      pass.lock();
      lock.lock();
      if (stopping_) return;
      m = NextPassModel();
      steps = BuildBatch(m.get(), ended);
    }
    for (auto& [job, status] : ended) {
      EndJob(job, status, status.ok() ? "cancelled" : "error");
    }
    if (!steps.empty() && m != nullptr) {
      pass_started_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
      RunPass(*m, steps);
      pass_started_ns_.store(0, std::memory_order_relaxed);
    }
  }
}

uint64_t RuntimeImpl::KvUsed() const {
  uint64_t used = 0;
  for (const auto& [id, s] : sessions_) used += s->kv_bytes();
  return used;
}

bool RuntimeImpl::MakeKvRoom(uint64_t extra) {
  while (KvUsed() + extra > options_.kv_budget_bytes) {
    if (!options_.evict_idle_sessions) return false;
    auto oldest = sessions_.end();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      if (it->second->busy) continue;
      if (oldest == sessions_.end() || it->second->last_used < oldest->second->last_used) oldest = it;
    }
    if (oldest == sessions_.end()) return false;
    sessions_.erase(oldest);
  }
  return true;
}

std::shared_ptr<LoadedModel> RuntimeImpl::NextPassModel() {
  std::map<std::string, std::shared_ptr<LoadedModel>> waiting;  // models with jobs, by name
  for (const std::shared_ptr<Job>& job : jobs_) {
    const std::shared_ptr<LoadedModel>& m = job->session().model;
    waiting.emplace(m->summary().path, m);
  }
  if (waiting.empty()) return nullptr;
  auto next = waiting.upper_bound(last_pass_model_);
  if (next == waiting.end()) next = waiting.begin();
  last_pass_model_ = next->first;
  return next->second;
}

std::vector<RuntimeImpl::Step> RuntimeImpl::BuildBatch(
    const LoadedModel* model, std::vector<std::pair<std::shared_ptr<Job>, absl::Status>>& ended) {
  const int pass_tokens = std::max<int>(kMinPassTokens, static_cast<int>(options_.prefill_chunk));
  std::vector<Step> steps;
  int tokens = 0;
  // Decode steps (one token) first so running sessions never wait behind a
  // long prompt; then prompt chunks in arrival order fill the rest.
  for (int pass_kind = 0; pass_kind < 2; ++pass_kind) {
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      const std::shared_ptr<Job>& job = *it;
      if (job->cancelled()) {
        ended.emplace_back(job, absl::OkStatus());
        it = jobs_.erase(it);
        continue;
      }
      // Another model's (its turn comes), or an embedding input (batched
      // below, in their own share of the pass).
      if (job->session().model.get() != model || job->embedding().has_value()) {
        ++it;
        continue;
      }
      Generation& g = job->generation();
      const size_t pending = g.NextInput().size();
      // Decoding: the prompt is in (a hybrid may re-feed accepted draft tokens).
      const bool decode = pending == 1 || g.fed() >= static_cast<size_t>(g.prompt_tokens());
      if (decode != (pass_kind == 0) || tokens >= pass_tokens) {
        ++it;
        continue;
      }
      const size_t chunk = std::min<size_t>({pending, options_.prefill_chunk, static_cast<size_t>(pass_tokens - tokens)});
      // A whole decode step may carry a draft (speculation.h), if the pass's
      // tokens and the KV budget have room for it; else it steps plainly.
      int draft_nodes = decode && chunk == pending
                            ? PlannedDraftNodes(*job, pass_tokens - tokens - static_cast<int>(chunk))
                            : 0;
      if (draft_nodes > 0 && !MakeKvRoom(KvGrowth(*job, chunk, draft_nodes))) draft_nodes = PlannedDraftNodes(*job, 0);
      const uint64_t extra = KvGrowth(*job, chunk, draft_nodes);
      if (extra > 0 && !MakeKvRoom(extra)) {
        ended.emplace_back(job, absl::ResourceExhaustedError(absl::StrCat(
                                    "the KV cache budget (", options_.kv_budget_bytes, " bytes) is full: ",
                                    sessions_.size(), " sessions hold ", KvUsed(),
                                    " bytes; close sessions or raise kv_budget")));
        it = jobs_.erase(it);
        continue;
      }
      steps.push_back(Step{.job = job, .tokens = chunk, .decides = g.AwaitsLogits(chunk), .decode = decode,
                           .draft_nodes = draft_nodes});
      tokens += static_cast<int>(chunk) + draft_nodes;
      ++it;
    }
  }
  AddEmbeddingSteps(model, steps, ended);
  return steps;
}

void RuntimeImpl::AddEmbeddingSteps(const LoadedModel* model, std::vector<Step>& steps,
                                    std::vector<std::pair<std::shared_ptr<Job>, absl::Status>>& ended) {
  const size_t limit = options_.embed_batch_tokens;
  size_t tokens = 0;
  bool holding = false;  // some input started and holds its cache: it will finish and free it
  for (const std::shared_ptr<Job>& job : jobs_) {
    holding |= job->embedding().has_value() && job->generation().fed() > 0;
  }
  for (auto it = jobs_.begin(); it != jobs_.end() && tokens < limit;) {
    Job& job = **it;
    if (!job.embedding().has_value() || job.session().model.get() != model) {
      ++it;
      continue;
    }
    Generation& g = job.generation();
    // An encoder's input runs whole, in one pass: it waits for a pass with room.
    const bool whole = IsEncoderArchitecture(model->config().architecture);
    if (whole && tokens > 0 && g.NextInput().size() > limit - tokens) break;
    if (g.fed() == 0) {
      // Starting: its whole cache now, so an input that starts always
      // finishes; without room it waits while other work runs.
      KvCache& kv = *job.session().kv;
      const int n = g.prompt_tokens();
      if (!MakeKvRoom(kv.BytesAfterReserve(n) - kv.bytes())) {
        if (holding || !steps.empty()) break;  // in order: the next pass may have room
        ended.emplace_back(*it, absl::ResourceExhaustedError(absl::StrCat(
                                    "the KV cache budget (", options_.kv_budget_bytes, " bytes) is full: ",
                                    SessionsHeld(), " sessions hold ", KvUsed(), " bytes; an input of ", n,
                                    " tokens needs ", kv.BytesAfterReserve(n), "; close sessions or raise kv_budget")));
        it = jobs_.erase(it);
        continue;
      }
      if (absl::Status reserved = kv.Reserve(n); !reserved.ok()) {
        ended.emplace_back(*it, reserved);
        it = jobs_.erase(it);
        continue;
      }
      holding = true;
    }
    const size_t chunk = whole ? g.NextInput().size() : std::min(g.NextInput().size(), limit - tokens);
    steps.push_back(Step{.job = *it, .tokens = chunk});
    tokens += chunk;
    ++it;
  }
}

uint64_t RuntimeImpl::KvGrowth(Job& job, size_t chunk, int draft_nodes) const {
  const KvCache& kv = *job.session().kv;
  uint64_t extra = kv.BytesAfterReserve(static_cast<int>(chunk) + draft_nodes) - kv.bytes();
  if (draft_nodes > 0) {
    // The draft catches up on what it has not seen, then feeds its nodes;
    // a hybrid's rollback point is one more copy of its state.
    const KvCache& dkv = *job.session().draft_kv;
    const int unseen = std::max(0, static_cast<int>(job.generation().history().size()) - dkv.size());
    extra += dkv.BytesAfterReserve(std::min<int>(unseen, options_.prefill_chunk) + draft_nodes) - dkv.bytes() +
             dkv.CheckpointBytes() + kv.CheckpointBytes();
  }
  return extra;
}

void RuntimeImpl::RunPass(LoadedModel& model, std::vector<Step>& steps) {
  // The drafts first: the draft models' passes propose each speculating
  // job's next tokens, which its step then carries.
  std::vector<Job*> drafting;
  for (Step& step : steps) {
    if (step.draft_nodes > 0) drafting.push_back(step.job.get());
  }
  if (!drafting.empty()) {
    const absl::Status drafted = ProposeDrafts(drafting, static_cast<int>(options_.prefill_chunk), draft_logits_);
    if (!drafted.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++spec_.errors;
      spec_.last_error = std::string(drafted.message());
    }
  }
  std::vector<SequenceStep> batch;
  batch.reserve(steps.size());
  for (Step& step : steps) {
    Job& job = *step.job;
    job.MarkStarted();
    if (job.draft().proposing) {
      batch.push_back(DraftStep(job));
      continue;
    }
    SequenceStep sequence{.kv = job.session().kv.get(), .tokens = job.generation().NextInput(step.tokens)};
    // A row nobody reads (a prompt chunk), or one whose draw its candidates decide.
    sequence.candidates = !step.decides || job.generation().TakesCandidates();
    if (job.embedding().has_value()) {  // hidden states to pool, not logits
      sequence.hidden = true;
      sequence.all_logits = job.embedding()->AllRows(static_cast<int>(job.generation().fed()));
    }
    batch.push_back(sequence);
  }
  const auto start = Clock::now();
  const absl::Status status = model.Forward(batch, logits_, &hidden_, &candidates_);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const PassTiming timing = model.residency().TakePassTiming();
  const int n = static_cast<int>(steps.size());
  const size_t vocab = model.config().vocab_size;
  int emitted = 0;
  SpeculationCounters spec;
  std::vector<std::pair<std::shared_ptr<Job>, absl::Status>> ended;
  size_t first_row = 0;         // the step's first logits row
  size_t first_hidden_row = 0;  // an embedding step's first row of hidden states
  const size_t dim = model.config().dim;
  for (int b = 0; b < n; ++b) {
    Job& job = *steps[b].job;
    Generation& g = job.generation();
    const size_t rows = batch[b].all_logits ? batch[b].tokens.size() : 1;
    size_t& row = batch[b].hidden ? first_hidden_row : first_row;
    const size_t step_row = row;
    row += rows;
    job.AddPass(seconds, timing.load_wait_seconds, timing.compute_seconds, n,
                !steps[b].decode || g.generated_tokens() == 0);
    if (!status.ok()) {
      ended.emplace_back(steps[b].job, status);  // nothing was committed to its cache
      continue;
    }
    if (batch[b].hidden) {
      // An embedding input: pool this chunk's states; done once all are in.
      job.embedding()->Add(std::span<const float>(hidden_).subspan(step_row * dim, rows * dim),
                           static_cast<int>(g.fed()), static_cast<int>(steps[b].tokens));
      g.InputFed(steps[b].tokens);
      if (job.embedding()->complete()) ended.emplace_back(steps[b].job, absl::OkStatus());
      continue;
    }
    const std::span<const float> step_logits =
        std::span<const float>(logits_).subspan(std::min(step_row * vocab, logits_.size()));
    if (job.draft().proposing) {
      // Verify the draft; emit what the target agreed to.
      const uint64_t proposed = job.draft().proposed, accepted = job.draft().accepted;
      absl::StatusOr<std::vector<GeneratedToken>> tokens = FinishDraft(job, step_logits.first(rows * vocab), vocab);
      if (!tokens.ok()) {
        ended.emplace_back(steps[b].job, tokens.status());
        continue;
      }
      ++job.stats().target_passes;
      ++spec.rounds;
      spec.proposed += job.draft().proposed - proposed;
      spec.accepted += job.draft().accepted - accepted;
      spec.tokens += tokens->size();
      for (const GeneratedToken& token : *tokens) {
        ++emitted;
        job.RecordText(token.text);
        job.sink().OnToken(token);
      }
      if (g.finished()) ended.emplace_back(steps[b].job, absl::OkStatus());
      continue;
    }
    g.InputFed(steps[b].tokens);
    if (g.fed() == static_cast<size_t>(g.prompt_tokens())) {
      // The prompt is in: a turn boundary, where a hybrid model keeps its
      // recurrent state for the session's next request.
      if (absl::Status kept = job.session().kv->Snapshot(); !kept.ok()) {
        ended.emplace_back(steps[b].job, kept);
        continue;
      }
    }
    if (!steps[b].decides) continue;
    ++job.stats().target_passes;
    // The pass brought back the rows whole, or every one reduced (forward.h).
    absl::StatusOr<std::optional<GeneratedToken>> token =
        candidates_.empty() ? g.Accept(step_logits.first(vocab)) : g.Accept(candidates_[step_row]);
    if (!token.ok()) {
      ended.emplace_back(steps[b].job, token.status());
      continue;
    }
    if (token->has_value()) {
      ++emitted;
      job.RecordText((*token)->text);
      job.sink().OnToken(**token);
    }
    if (g.finished()) ended.emplace_back(steps[b].job, absl::OkStatus());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++passes_;
    generated_ += emitted;
    spec_.Add(spec);
    throughput_.Add(emitted);
    for (auto& [job, s] : ended) jobs_.erase(std::find(jobs_.begin(), jobs_.end(), job));
  }
  for (auto& [job, s] : ended) {
    EndJob(job, s, s.ok() ? FinishReasonName(job->generation().finish_reason()) : "error");
  }
}

void RuntimeImpl::EndJob(const std::shared_ptr<Job>& job, const absl::Status& status, const std::string& finish) {
  {
    // Its cache is freed before the client hears the job ended, and its
    // model is used now (keep_alive counts from here).
    std::lock_guard<std::mutex> lock(mu_);
    Session& session = job->session();
    if (ModelSlot* slot = SlotOf(*session.model); slot != nullptr) slot->last_used = Clock::now();
    if (session.temporary) {
      sessions_.erase(session.id);
      session.model.reset();  // the job's caller may hold the job a while: the model is idle now
    }
  }
  job_metrics_.Observe(job->stats(), job->generation().generated_tokens(), status.ok());
  if (options_.log_requests && !job->embedding().has_value()) {  // an embedding request logs once (Embed)  // before the client hears the end: the line is there when it looks
    const JobStats& s = job->stats();
    Log(absl::StrFormat("%s: model %s, %d prompt tokens (%d cached), %d generated, %.2f s, %s",
                        job->origin().empty() ? "request" : job->origin(), job->model(), s.prompt_tokens,
                        s.cached_tokens, job->generation().generated_tokens(), job->seconds(),
                        status.ok() ? finish : absl::StrCat("failed: ", status.message())));
  }
  job->Finish(status, finish);
}

namespace {

// A model's residency, loader and layers, into `residency`, `loader`, `layers`.
void ReportModel(LoadedModel& m, ResidencyReport& residency, LoaderReport& loader, std::vector<LayerReport>* layers) {
  const ResidencyManager& res = m.residency();
  residency = res.Report();
  residency.global_bytes = m.global_bytes();
  std::vector<LayerReport> layer_reports = res.LayerReports();
  m.AddDeviceReport(residency, layer_reports);
  if (layers != nullptr) *layers = std::move(layer_reports);
  const LoaderStats ls = res.loader_stats();
  loader = LoaderReport{.running = ls.running, .pid = ls.pid, .restarts = ls.restarts, .stalls = ls.stalls,
                        .checksum_failures = ls.checksum_failures, .bytes_read = ls.bytes_read,
                        .read_gbps = ls.read_seconds > 0 ? ls.bytes_read / ls.read_seconds / 1e9 : 0,
                        .io_mode = ls.io_mode};
}

}  // namespace

RuntimeReport RuntimeImpl::Report() {
  RuntimeReport r;
  std::shared_ptr<LoadedModel> m;
  std::vector<std::shared_ptr<LoadedModel>> loaded;  // r.models' order
  {
    std::lock_guard<std::mutex> lock(mu_);
    m = DefaultModel();
    CloseIdleSessions();
    const auto now = Clock::now();
    std::map<const LoadedModel*, LoadedModelReport*> by_model;
    for (auto& [name, slot] : models_) {
      LoadedModelReport& lr = r.models.emplace_back();
      lr.summary = Summary(*slot.model);
      lr.backend = slot.model->backend();
      lr.is_default = slot.model == m;
      lr.kv_types = slot.model->kv_types();
      lr.kv_bytes_per_position = slot.model->NewCache(1)->PositionBytes();
      lr.kv_budget_positions = static_cast<uint32_t>(ServableContext(*slot.model));
      lr.jobs = static_cast<uint32_t>(JobsOn(*slot.model));
      const double idle = std::chrono::duration<double>(now - slot.last_used).count();
      lr.idle_seconds = InUse(slot) ? 0 : idle;
      if (slot.keep_alive != absl::InfiniteDuration()) {
        lr.expires_in_seconds = std::max(0.0, absl::ToDoubleSeconds(slot.keep_alive) - lr.idle_seconds);
      }
      loaded.push_back(slot.model);
    }
    for (size_t i = 0; i < loaded.size(); ++i) by_model[loaded[i].get()] = &r.models[i];
    for (const auto& [key, s] : sessions_) {
      if (auto it = by_model.find(s->model.get()); it != by_model.end()) {
        it->second->kv_bytes += s->kv_bytes();
        it->second->sessions += s->temporary ? 0 : 1;
      }
      if (s->temporary) continue;
      SessionReport sr;
      sr.id = s->id;
      sr.owner = s->owner;
      sr.model = s->model->summary().path;
      sr.positions = static_cast<uint32_t>(s->kv->size());
      sr.context_length = static_cast<uint32_t>(s->kv->max_positions());
      sr.kv_bytes = s->kv_bytes();
      sr.active = s->busy;
      sr.idle_seconds = s->busy ? 0 : std::chrono::duration<double>(now - s->last_used).count();
      r.sessions.push_back(sr);
    }
    r.kv_used_bytes = KvUsed();
    if (m != nullptr) r.model = Summary(*m);
    r.loading = loading_;
    SpeculationReport& sr = r.speculation;
    const ModelSlot* slot = m != nullptr ? SlotOf(*m) : nullptr;
    const DraftModel* draft = slot != nullptr ? slot->draft.get() : nullptr;
    sr.draft_model = draft != nullptr ? draft->path() : "";
    sr.draft_bytes = draft != nullptr ? draft->bytes() : 0;
    sr.settings = speculation_;
    sr.rounds = spec_.rounds;
    sr.proposed = spec_.proposed;
    sr.accepted = spec_.accepted;
    sr.tokens = spec_.tokens;
    sr.acceptance = spec_.proposed > 0 ? static_cast<double>(spec_.accepted) / spec_.proposed : 0;
    sr.tokens_per_round = spec_.rounds > 0 ? static_cast<double>(spec_.tokens) / spec_.rounds : 0;
    sr.errors = spec_.errors;
    sr.last_error = spec_.last_error;
    r.passes = passes_;
    r.generated_tokens = generated_;
    for (const std::shared_ptr<Job>& job : jobs_) (job->started() ? r.jobs_running : r.jobs_waiting)++;
    r.tokens_per_second = throughput_.Rate(now);
    r.serving = !stopping_;
    r.uptime_seconds = std::chrono::duration<double>(now - started_).count();
  }
  r.jobs = job_metrics_.Totals();
  r.kv_budget_bytes = options_.kv_budget_bytes;
  {
    std::lock_guard<std::mutex> lock(drafts_mu_);
    r.speculation.drafts_loaded = static_cast<uint32_t>(drafts_.size());
  }
  r.speculation.present = !r.speculation.draft_model.empty() || r.speculation.rounds > 0 ||
                          r.speculation.drafts_loaded > 0;
  for (size_t i = 0; i < loaded.size(); ++i) {
    LoadedModelReport& lr = r.models[i];
    std::vector<LayerReport> layers;
    ReportModel(*loaded[i], lr.residency, lr.loader, &layers);
    for (const LayerReport& layer : layers) (layer.resident ? lr.resident_layer_bytes : lr.streamed_layer_bytes) += layer.bytes;
    lr.overlap = loaded[i]->residency().overlap();
    if (lr.residency.device.present) lr.residency.device.kv_bytes = lr.kv_bytes;
  }
  if (m == nullptr) return r;
  r.backend = m->backend();
  ReportModel(*m, r.residency, r.loader, &r.layers);
  if (r.residency.device.present) r.residency.device.kv_bytes = r.kv_used_bytes;  // the caches live on the device
  r.overlap = m->residency().overlap();
  return r;
}

}  // namespace octo
