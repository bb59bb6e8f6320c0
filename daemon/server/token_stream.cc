#include "daemon/server/token_stream.h"

#include <deque>
#include <mutex>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/server/proto_convert.h"
#include "daemon/server/status_map.h"

namespace octo {

// The TokenSink the core writes to, and the write queue behind it. Every
// method may be called from any thread. Invariant: the reactor is alive
// until finished_ is set (Finish is the last thing called on it), and
// Finish is called only with no write in flight.
class StreamSink final : public TokenSink {
 public:
  StreamSink(TokenStream* reactor, bool with_logprobs) : reactor_(reactor), with_logprobs_(with_logprobs) {}

  void OnStarted(const std::string& session_id, int prompt_tokens) override {
    v1::GenerateResponse message;
    message.mutable_started()->set_session_id(session_id);
    message.mutable_started()->set_prompt_tokens(prompt_tokens);
    Push(std::move(message), std::nullopt);
  }

  void OnToken(const GeneratedToken& token) override {
    v1::GenerateResponse message;
    ToProto(token, with_logprobs_, message.mutable_token());
    Push(std::move(message), std::nullopt);
  }

  void OnDone(const absl::Status& status, const std::string& finish_reason, const std::string& tail,
              const JobStats& stats) override {
    if (!status.ok()) {
      Push(std::nullopt, ToGrpcStatus(status));
      return;
    }
    v1::GenerateResponse message;
    v1::GenerateResponse::Done* done = message.mutable_done();
    done->set_finish_reason(finish_reason);
    done->set_tail(tail);
    ToProto(stats, done->mutable_stats());
    Push(std::move(message), grpc::Status::OK);
  }

  // The job is running; `handle` cancels it. Cancels at once when the
  // client left before Submit returned.
  void SetHandle(std::shared_ptr<JobHandle> handle) {
    bool cancel;
    {
      absl::MutexLock lock(&mu_);
      handle_ = handle;
      cancel = client_gone_;
    }
    if (cancel) handle->Cancel();
  }

  // Submit refused the job: finish with its error.
  void Refuse(const absl::Status& status) { Push(std::nullopt, ToGrpcStatus(status)); }

  // The client is gone (cancelled, deadline, disconnected, or a write
  // failed): cancel the job, drop what is queued, finish CANCELLED.
  void ClientGone() {
    std::shared_ptr<JobHandle> handle;
    {
      absl::MutexLock lock(&mu_);
      if (client_gone_) return;
      client_gone_ = true;
      queue_.clear();
      if (!final_.has_value()) final_ = grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled");
      handle = handle_;
    }
    if (handle != nullptr) handle->Cancel();
    Pump();
  }

  void WriteDone(bool ok) {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
    }
    // A failed write means the client is gone. ClientGone does nothing when
    // OnCancel got there first, so Pump here, not only in ClientGone: with
    // the write over, Finish can go out, and the call ends.
    if (!ok) ClientGone();
    Pump();
  }

 private:
  // Queues `message` (if any) and the final status (if any), then writes.
  void Push(std::optional<v1::GenerateResponse> message, std::optional<grpc::Status> final_status) {
    {
      absl::MutexLock lock(&mu_);
      if (client_gone_ || final_.has_value()) return;  // the call is over for the client
      if (message.has_value()) queue_.push_back(std::move(*message));
      if (final_status.has_value()) final_ = std::move(final_status);
    }
    Pump();
  }

  // Starts the next write, or Finish once the queue is empty and the final
  // status is known. gRPC calls are made outside mu_: a reaction may run on
  // another thread at once and take mu_ itself.
  void Pump() {
    TokenStream* reactor;
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || writing_) return;
      reactor = reactor_;
      if (!queue_.empty()) {
        in_flight_ = std::move(queue_.front());
        queue_.pop_front();
        writing_ = true;
      } else if (final_.has_value()) {
        finished_ = true;
        finish = *final_;
      } else {
        return;
      }
    }
    if (finish.has_value()) {
      reactor->Finish(*finish);
    } else {
      reactor->StartWrite(&in_flight_);
    }
  }

  absl::Mutex mu_;
  TokenStream* const reactor_;                                // valid while !finished_
  const bool with_logprobs_;
  std::deque<v1::GenerateResponse> queue_ ABSL_GUARDED_BY(mu_);
  v1::GenerateResponse in_flight_;                            // the message being written; owned by the write
  std::optional<grpc::Status> final_ ABSL_GUARDED_BY(mu_);    // how the call ends once the queue is written
  std::shared_ptr<JobHandle> handle_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
};

TokenStream::TokenStream() = default;

TokenStream* TokenStream::Start(Runtime& runtime, absl::StatusOr<GenerateJob> job) {
  auto* stream = new TokenStream();
  const bool with_logprobs = job.ok() && job->sampling.top_logprobs > 0;
  stream->sink_ = std::make_shared<StreamSink>(stream, with_logprobs);
  if (!job.ok()) {
    stream->sink_->Refuse(job.status());
    return stream;
  }
  absl::StatusOr<std::shared_ptr<JobHandle>> handle = runtime.Submit(*std::move(job), stream->sink_);
  if (!handle.ok()) {
    stream->sink_->Refuse(handle.status());
  } else {
    stream->sink_->SetHandle(*std::move(handle));
  }
  return stream;
}

void TokenStream::OnWriteDone(bool ok) { sink_->WriteDone(ok); }

void TokenStream::OnCancel() { sink_->ClientGone(); }

void TokenStream::OnDone() { delete this; }

}  // namespace octo
