#include "daemon/http/job_events.h"

#include "daemon/http/exchange.h"

namespace octo {

void JobEvents::OnStarted(const std::string&, int prompt_tokens) {
  JobEvent event;
  event.kind = JobEvent::Kind::kStarted;
  event.prompt_tokens = prompt_tokens;
  Push(std::move(event));
}

void JobEvents::OnToken(const GeneratedToken& token) {
  JobEvent event;
  event.kind = JobEvent::Kind::kToken;
  event.token = token;
  Push(std::move(event));
}

void JobEvents::OnDone(const absl::Status& status, const std::string& finish_reason, const std::string& tail,
                       const JobStats& stats) {
  JobEvent event;
  event.kind = JobEvent::Kind::kDone;
  event.status = status;
  event.finish_reason = finish_reason;
  event.tail = tail;
  event.stats = stats;
  Push(std::move(event));
}

void JobEvents::Push(JobEvent event) {
  absl::MutexLock lock(&mu_);
  events_.push_back(std::move(event));
}

std::optional<JobEvent> JobEvents::Next(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto has_event = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !events_.empty(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&has_event), timeout)) return std::nullopt;
  JobEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

absl::Status RunJob(Runtime& runtime, GenerateJob job, HttpExchange& exchange,
                    const std::function<bool(const JobEvent&)>& on_event) {
  auto events = std::make_shared<JobEvents>();
  absl::StatusOr<std::shared_ptr<JobHandle>> handle = runtime.Submit(std::move(job), events);
  if (!handle.ok()) return handle.status();
  bool delivering = true;
  for (;;) {
    std::optional<JobEvent> event = events->Next(kClientCheckInterval);
    if (!event.has_value()) {
      if (delivering && exchange.ClientGone()) {
        delivering = false;
        (*handle)->Cancel();
      }
      continue;
    }
    // The core calls OnDone exactly once, after a cancel too: wait for it,
    // so the job's cache is freed before this connection serves again.
    const bool done = event->kind == JobEvent::Kind::kDone;
    if (delivering && !on_event(*event)) {
      delivering = false;
      (*handle)->Cancel();
    }
    if (done) return absl::OkStatus();
  }
}

}  // namespace octo
