#include "storage/loader_read_queue.h"

#include <liburing.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace octo {
namespace {

class UringReadQueue : public ReadQueue {
 public:
  ~UringReadQueue() override {
    // Reads still in flight write into memory the caller may free: reap them.
    if (!initialised_) return;
    while (in_flight_ > 0 && Wait().ok()) {
    }
    io_uring_queue_exit(&ring_);
  }

  static absl::StatusOr<std::unique_ptr<ReadQueue>> Make(uint32_t depth) {
    auto queue = std::unique_ptr<UringReadQueue>(new UringReadQueue(depth));
    if (int err = io_uring_queue_init(depth, &queue->ring_, 0); err < 0) {
      queue->initialised_ = false;
      return absl::UnavailableError(absl::StrCat("io_uring_queue_init: ", std::strerror(-err)));
    }
    return std::unique_ptr<ReadQueue>(std::move(queue));
  }

  const char* name() const override { return "io_uring"; }
  uint32_t depth() const override { return depth_; }

  absl::Status Submit(int fd, uint64_t offset, std::span<uint8_t> dest, uint64_t tag) override {
    if (in_flight_ >= depth_) return absl::FailedPreconditionError("io_uring queue is full");
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return absl::InternalError("io_uring has no free submission entry");
    io_uring_prep_read(sqe, fd, dest.data(), static_cast<unsigned>(dest.size()), offset);
    io_uring_sqe_set_data64(sqe, tag);
    ++in_flight_;
    ++unsubmitted_;  // handed to the kernel in one batch by the next Wait
    return absl::OkStatus();
  }

  absl::StatusOr<Completion> Wait() override {
    if (in_flight_ == 0) return absl::FailedPreconditionError("no read in flight");
    int err = 0;
    if (unsubmitted_ > 0) {
      do {
        err = io_uring_submit_and_wait(&ring_, 1);
      } while (err == -EINTR);
      if (err < 0) return absl::InternalError(absl::StrCat("io_uring submit: ", std::strerror(-err)));
      unsubmitted_ = 0;
    }
    io_uring_cqe* cqe = nullptr;
    do {
      err = io_uring_wait_cqe(&ring_, &cqe);
    } while (err == -EINTR);
    if (err < 0) return absl::InternalError(absl::StrCat("io_uring wait: ", std::strerror(-err)));
    Completion done{io_uring_cqe_get_data64(cqe), cqe->res};
    io_uring_cqe_seen(&ring_, cqe);
    --in_flight_;
    return done;
  }

 private:
  explicit UringReadQueue(uint32_t depth) : depth_(depth) {}
  const uint32_t depth_;
  io_uring ring_{};
  bool initialised_ = true;
  uint32_t in_flight_ = 0;
  uint32_t unsubmitted_ = 0;
};

class ThreadReadQueue : public ReadQueue {
 public:
  explicit ThreadReadQueue(uint32_t depth) : depth_(depth) {
    for (uint32_t i = 0; i < depth; ++i) workers_.emplace_back([this] { Work(); });
  }
  ~ThreadReadQueue() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;  // workers finish the reads already taken, then exit
    }
    for (std::thread& t : workers_) t.join();
  }

  const char* name() const override { return "threads"; }
  uint32_t depth() const override { return depth_; }

  absl::Status Submit(int fd, uint64_t offset, std::span<uint8_t> dest, uint64_t tag) override {
    absl::MutexLock lock(&mu_);
    if (in_flight_ >= depth_) return absl::FailedPreconditionError("read thread queue is full");
    ++in_flight_;
    pending_.push_back(Job{fd, offset, dest, tag});
    return absl::OkStatus();
  }

  absl::StatusOr<Completion> Wait() override {
    absl::MutexLock lock(&mu_);
    if (in_flight_ == 0) return absl::FailedPreconditionError("no read in flight");
    mu_.Await(absl::Condition(
        +[](std::deque<Completion>* done) { return !done->empty(); }, &done_));
    Completion c = done_.front();
    done_.pop_front();
    --in_flight_;
    return c;
  }

 private:
  struct Job {
    int fd;
    uint64_t offset;
    std::span<uint8_t> dest;
    uint64_t tag;
  };

  void Work() {
    while (true) {
      Job job;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &ThreadReadQueue::HasWorkOrStopping));
        if (pending_.empty()) return;  // stopping
        job = pending_.front();
        pending_.pop_front();
      }
      ssize_t n;
      do {
        n = ::pread(job.fd, job.dest.data(), job.dest.size(), static_cast<off_t>(job.offset));
      } while (n < 0 && errno == EINTR);
      absl::MutexLock lock(&mu_);
      done_.push_back(Completion{job.tag, n < 0 ? -int64_t{errno} : int64_t{n}});
    }
  }
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !pending_.empty(); }

  const uint32_t depth_;
  absl::Mutex mu_;
  std::deque<Job> pending_ ABSL_GUARDED_BY(mu_);
  std::deque<Completion> done_ ABSL_GUARDED_BY(mu_);
  uint32_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ReadQueue>> MakeUringReadQueue(uint32_t depth) {
  return UringReadQueue::Make(depth);
}

std::unique_ptr<ReadQueue> MakeThreadReadQueue(uint32_t depth) { return std::make_unique<ThreadReadQueue>(depth); }

std::unique_ptr<ReadQueue> MakeBestReadQueue(uint32_t depth) {
  auto uring = MakeUringReadQueue(depth);
  if (uring.ok()) return std::move(uring).value();
  return MakeThreadReadQueue(depth);
}

}  // namespace octo
