#include "kernels/cuda/sim/stream.h"

#include <utility>

#include "kernels/cuda/sim/grid_runner.h"

namespace octo::cuda_sim {
thread_local const std::string* tls_stream_op = nullptr;
}  // namespace octo::cuda_sim

CUstream_st::CUstream_st(bool blocking, std::string name)
    : blocking_(blocking), name_(std::move(name)), thread_([this] { Loop(); }) {}

CUstream_st::~CUstream_st() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t CUstream_st::Enqueue(std::string what, std::function<void()> op) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(Op{std::move(what), std::move(op)});
  cv_.notify_all();
  return ++enqueued_;
}

uint64_t CUstream_st::last_ticket() {
  std::lock_guard<std::mutex> lock(mu_);
  return enqueued_;
}

bool CUstream_st::Done(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ >= ticket;
}

void CUstream_st::WaitDone(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return completed_ >= ticket; });
}

void CUstream_st::Loop() {
  octo::cuda_sim::EnsureSignalStack();
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_, and everything queued has run
    Op op = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    octo::cuda_sim::tls_stream_op = &op.what;
    op.run();
    octo::cuda_sim::tls_stream_op = nullptr;
    lock.lock();
    ++completed_;
    cv_.notify_all();
  }
}

uint64_t CUevent_st::NewRecord() {
  std::lock_guard<std::mutex> lock(mu_);
  return ++recorded_;
}

void CUevent_st::Complete(uint64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  if (generation > completed_) completed_ = generation;
  timed_ = true;
  time_ = std::chrono::steady_clock::now();
  cv_.notify_all();
}

uint64_t CUevent_st::recorded() {
  std::lock_guard<std::mutex> lock(mu_);
  return recorded_;
}

bool CUevent_st::Done(uint64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ >= generation;
}

void CUevent_st::WaitDone(uint64_t generation) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return completed_ >= generation; });
}

bool CUevent_st::Time(std::chrono::steady_clock::time_point* time) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!timed_ || completed_ < recorded_) return false;
  *time = time_;
  return true;
}
