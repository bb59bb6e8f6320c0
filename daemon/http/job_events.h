// Running a generation for an HTTP request on the request's own thread.
//
// The runtime delivers a job's events on its scheduler thread, which must
// never block; JobEvents queues them and RunJob hands them, in order, to
// the route's callback on the connection's thread. While it waits it
// watches the client: one that hangs up (or a callback that could not
// write) cancels the job, so its slot in the batch and its KV cache are
// freed at the next pass, as for a gRPC client that goes away.
#pragma once

#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/runtime.h"

namespace octo {

class HttpExchange;

// How often a waiting request checks whether its client is still there.
inline constexpr absl::Duration kClientCheckInterval = absl::Milliseconds(50);

struct JobEvent {
  enum class Kind { kStarted, kToken, kDone };
  Kind kind = Kind::kStarted;
  int prompt_tokens = 0;        // kStarted
  GeneratedToken token;         // kToken
  absl::Status status;          // kDone: not OK when the job failed
  std::string finish_reason;    // kDone: "stop", "length", "context" or "cancelled"
  std::string tail;             // kDone: held-back text that turned out not to be a stop string
  JobStats stats;               // kDone
};

// A TokenSink that queues events for another thread.
class JobEvents final : public TokenSink {
 public:
  void OnStarted(const std::string& session_id, int prompt_tokens) override;
  void OnToken(const GeneratedToken& token) override;
  void OnDone(const absl::Status& status, const std::string& finish_reason, const std::string& tail,
              const JobStats& stats) override;

  // The next event, or nullopt when none came within `timeout`.
  std::optional<JobEvent> Next(absl::Duration timeout);

 private:
  void Push(JobEvent event);

  absl::Mutex mu_;
  std::deque<JobEvent> events_ ABSL_GUARDED_BY(mu_);
};

// Submits `job` and calls `on_event` for each of its events, the last being
// kDone. `on_event` returns false when it could not deliver (the client is
// gone): the job is cancelled and its remaining events are not delivered.
// Returns Submit's error when the job was refused (on_event never called);
// OK once the job is done, however it ended.
absl::Status RunJob(Runtime& runtime, GenerateJob job, HttpExchange& exchange,
                    const std::function<bool(const JobEvent&)>& on_event);

}  // namespace octo
