// Embeddings: each input of a request becomes a job of the scheduler, with
// a temporary cache and an EmbeddingPool in place of sampling, so the inputs
// of one request, of concurrent requests and the generations beside them
// share forward passes (one read of each streamed layer serves all).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/core/runtime_impl.h"
#include "daemon/engine/context_limit.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

constexpr auto kCancelCheck = std::chrono::milliseconds(50);

// Counts a request's inputs down as their jobs end, keeping the first failure.
class EmbedCountdown final : public TokenSink {
 public:
  explicit EmbedCountdown(size_t inputs) : left_(inputs) {}

  void OnStarted(const std::string&, int) override {}
  void OnToken(const GeneratedToken&) override {}
  void OnDone(const absl::Status& status, const std::string& finish, const std::string&, const JobStats&) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok() && !status.ok()) status_ = status;
    if (status_.ok() && finish == "cancelled") status_ = absl::CancelledError("the embedding request was cancelled");
    --left_;
    done_.notify_all();
  }

  // Waits for every input; `cancelled` is asked every kCancelCheck, and
  // `cancel` called once when it says so.
  absl::Status Wait(const std::function<bool()>& cancelled, const std::function<void()>& cancel) {
    std::unique_lock<std::mutex> lock(mu_);
    bool cancel_sent = false;
    while (left_ > 0) {
      if (done_.wait_for(lock, kCancelCheck, [&] { return left_ == 0; })) break;
      if (!cancel_sent && cancelled && cancelled()) {
        cancel_sent = true;
        lock.unlock();
        cancel();
        lock.lock();
      }
    }
    return status_;
  }

 private:
  std::mutex mu_;
  std::condition_variable done_;
  size_t left_;
  absl::Status status_;
};

absl::Status ValidateEmbedJob(const EmbedJob& job) {
  const size_t inputs = job.texts.size() + job.token_inputs.size();
  if (!job.texts.empty() && !job.token_inputs.empty()) {
    return absl::InvalidArgumentError("input: give texts or token lists, not both");
  }
  if (inputs == 0) return absl::InvalidArgumentError("input: the request has no input to embed");
  if (inputs > kMaxEmbedInputs) {
    return absl::InvalidArgumentError(
        absl::StrCat("input: ", inputs, " inputs; the limit is ", kMaxEmbedInputs, " per request"));
  }
  for (size_t i = 0; i < job.texts.size(); ++i) {
    if (job.texts[i].size() > kMaxPromptBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("input[", i, "] is ", job.texts[i].size(), " bytes; the limit is ", kMaxPromptBytes));
    }
  }
  if (job.context_length < 0) return absl::InvalidArgumentError("the context length must not be negative");
  if (job.dimensions < 0) return absl::InvalidArgumentError("dimensions must not be negative");
  return absl::OkStatus();
}

}  // namespace

size_t RuntimeImpl::SessionsHeld() const {
  return static_cast<size_t>(
      std::count_if(sessions_.begin(), sessions_.end(), [](const auto& entry) { return !entry.second->embedding; }));
}

absl::StatusOr<std::vector<std::vector<int32_t>>> RuntimeImpl::EmbedInputs(const EmbedJob& job,
                                                                           const LoadedModel& model, int context,
                                                                           bool* truncated) const {
  std::vector<std::vector<int32_t>> inputs;
  const size_t n = job.texts.size() + job.token_inputs.size();
  for (size_t i = 0; i < n; ++i) {
    std::vector<int32_t> tokens =
        job.texts.empty() ? job.token_inputs[i]
                          : model.tokenizer().Encode(job.texts[i], /*add_special=*/true, /*parse_special=*/false);
    if (tokens.empty()) return absl::InvalidArgumentError(absl::StrCat("input[", i, "] is empty"));
    for (int32_t token : tokens) {
      if (token < 0 || static_cast<uint32_t>(token) >= model.config().vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("input[", i, "]: token id ", token,
                                                       " is outside the vocabulary (", model.config().vocab_size,
                                                       " tokens)"));
      }
    }
    if (static_cast<int64_t>(tokens.size()) > context) {
      if (!job.truncate) {
        const absl::Status exceeded = ContextExceededError(static_cast<int64_t>(tokens.size()), context);
        absl::Status named = Annotate(exceeded, absl::StrCat("input[", i, "]"));
        named.SetPayload(kContextExceededPayload, *exceeded.GetPayload(kContextExceededPayload));
        return named;
      }
      tokens.resize(static_cast<size_t>(context));
      *truncated = true;
    }
    inputs.push_back(std::move(tokens));
  }
  return inputs;
}

absl::StatusOr<EmbedResult> RuntimeImpl::Embed(const EmbedJob& request, const std::function<bool()>& cancelled) {
  const auto start = Clock::now();
  OCTO_RETURN_IF_ERROR(ValidateEmbedJob(request));
  OCTO_ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> m, ModelFor(request.model, /*load=*/true, request.keep_alive));
  const Pooling pooling = m->config().pooling;
  if (pooling == Pooling::kRank) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", m->summary().path, "' is a reranker (pooling \"rank\"): it scores, it does not embed"));
  }
  if (static_cast<uint32_t>(request.dimensions) > m->config().dim) {
    return absl::InvalidArgumentError(absl::StrCat("dimensions is ", request.dimensions, "; model '", m->summary().path,
                                                   "' gives ", m->config().dim, "-wide embeddings"));
  }
  const int servable = ServableContext(*m);
  const int context = request.context_length > 0 ? std::min(request.context_length, servable) : servable;
  EmbedResult result;
  OCTO_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> inputs, EmbedInputs(request, *m, context, &result.truncated));
  if (result.truncated) {
    Log(absl::StrCat("truncating embedding input (", request.origin.empty() ? "a request" : request.origin,
                     ") to the context's ", context, " tokens"));
  }

  // One job per input, each in a temporary cache sized to it.
  auto countdown = std::make_shared<EmbedCountdown>(inputs.size());
  std::vector<std::shared_ptr<Job>> jobs;
  std::vector<std::shared_ptr<Session>> sessions;
  jobs.reserve(inputs.size());
  sessions.reserve(inputs.size());
  for (std::vector<int32_t>& tokens : inputs) {
    const int n_tokens = static_cast<int>(tokens.size());
    result.input_tokens.push_back(n_tokens);
    result.prompt_tokens += n_tokens;
    auto session = std::make_shared<Session>();
    session->id = NewSessionId();
    session->owner = request.owner;
    session->temporary = session->embedding = session->busy = true;
    session->model = m;
    session->kv = m->NewCache(n_tokens);
    OCTO_ASSIGN_OR_RETURN(Generation generation,
                          Generation::Create(m->tokenizer(), SamplingParams{}, std::move(tokens), n_tokens));
    auto job = std::make_shared<Job>(session, std::move(generation), countdown, std::vector<ChatMessage>{}, 0);
    job->embedding().emplace(pooling, static_cast<int>(m->config().dim), n_tokens);
    job->origin() = request.origin;
    job->model() = m->summary().path;
    jobs.push_back(std::move(job));
    sessions.push_back(std::move(session));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("octod is shutting down");
    if (SlotOf(*m) == nullptr) {
      return absl::AbortedError("the model was loaded or unloaded while this request was being prepared; send it again");
    }
    for (const std::shared_ptr<Session>& session : sessions) sessions_[session->id] = session;
    jobs_.insert(jobs_.end(), jobs.begin(), jobs.end());
    work_cv_.notify_all();
  }
  const absl::Status waited = countdown->Wait(cancelled, [&jobs] {
    for (const std::shared_ptr<Job>& job : jobs) job->Cancel();
  });
  if (!waited.ok()) {
    if (options_.log_requests) {
      Log(absl::StrFormat("%s: model %s, %d inputs, failed: %s",
                          request.origin.empty() ? "embedding request" : request.origin, m->summary().path,
                          jobs.size(), waited.message()));
    }
    return waited;
  }
  for (const std::shared_ptr<Job>& job : jobs) {
    OCTO_ASSIGN_OR_RETURN(std::vector<float> v,
                          ShapeEmbedding(job->embedding()->Result(), request.dimensions, request.normalize));
    result.embeddings.push_back(std::move(v));
  }
  result.model = m->summary().path;
  result.pooling = PoolingName(pooling);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (options_.log_requests) {
    Log(absl::StrFormat("%s: model %s, %d inputs, %d tokens, %.2f s, embedded",
                        request.origin.empty() ? "embedding request" : request.origin, result.model, jobs.size(),
                        result.prompt_tokens, result.seconds));
  }
  return result;
}

}  // namespace octo
