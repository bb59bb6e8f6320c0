// Streams and events of the executor. The runtime declares both types
// (`typedef struct CUstream_st* cudaStream_t;`, likewise CUevent_st); they
// are defined here, at global scope, so the handles the runtime API passes
// around are these objects.
//
// A stream is an ordered queue with its own host thread, so two streams
// really run at once. Operations carry tickets: ticket n is the n-th
// operation queued on the stream; done(n) once it has run.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"

struct CUstream_st {
 public:
  // `blocking`: synchronises with the legacy default stream (cudaStreamCreate),
  // not (cudaStreamNonBlocking).
  CUstream_st(bool blocking, std::string name);
  // Runs what is queued, then stops the thread.
  ~CUstream_st();
  CUstream_st(const CUstream_st&) = delete;
  CUstream_st& operator=(const CUstream_st&) = delete;

  bool blocking() const { return blocking_; }
  const std::string& name() const { return name_; }

  // Queues `op` (`what` names it in fault reports); returns its ticket.
  uint64_t Enqueue(std::string what, std::function<void()> op);
  uint64_t last_ticket();
  bool Done(uint64_t ticket);
  void WaitDone(uint64_t ticket);

 private:
  struct Op {
    std::string what;
    std::function<void()> run;
  };
  void Loop();

  const bool blocking_;
  const std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

struct CUevent_st {
 public:
  explicit CUevent_st(unsigned flags) : flags_(flags) {}

  unsigned flags() const { return flags_; }
  // A new record: returns its generation (1, 2, ...).
  uint64_t NewRecord();
  // The stream reached the record of `generation`.
  void Complete(uint64_t generation);
  // The latest record at the time of the call: 0 if never recorded.
  uint64_t recorded();
  bool Done(uint64_t generation);
  void WaitDone(uint64_t generation);
  // When the latest completed record completed; false if none did.
  bool Time(std::chrono::steady_clock::time_point* time);

 private:
  const unsigned flags_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t recorded_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  bool timed_ ABSL_GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point time_ ABSL_GUARDED_BY(mu_);
};

namespace octo::cuda_sim {
// The stream operation this host thread is running ("" outside one), for
// fault reports.
extern thread_local const std::string* tls_stream_op;
}  // namespace octo::cuda_sim
