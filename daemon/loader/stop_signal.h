// A one-way signal from octod's shutdown to a thread blocked on the loader.
// Once raised, LayerStream's waits end at once (CANCELLED), so a pass
// waiting on a loader that makes no progress cannot hold SIGTERM up.
//
// Threads: Raise and raised from any thread; fd() is polled by the waiter.
#pragma once

#include <atomic>
#include <memory>

namespace octo {

class StopSignal {
 public:
  // An eventfd; a StopSignal whose eventfd could not be made still works
  // through raised(), only its waiters notice at their next time slice.
  static std::shared_ptr<StopSignal> Create();
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  void Raise();
  bool raised() const { return raised_.load(std::memory_order_acquire); }
  // Readable once raised; -1 when there is no eventfd.
  int fd() const { return fd_; }

 private:
  explicit StopSignal(int fd) : fd_(fd) {}
  const int fd_;
  std::atomic<bool> raised_{false};
};

}  // namespace octo
