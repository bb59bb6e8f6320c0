#include "kernels/cpu/thread_pool.h"

#include <algorithm>

namespace octo::cpu {

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads < 1) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  workers_.reserve(n_threads - 1);
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunTasks() {
  for (;;) {
    const int64_t i = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (i >= n_tasks_) return;
    (*task_)(i);
  }
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return shutdown_ || generation_ != seen; });
      if (shutdown_) return;
      seen = generation_;
    }
    RunTasks();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (++workers_done_ == static_cast<int>(workers_.size())) done_cv_.notify_one();
    }
  }
}

void ThreadPool::ParallelFor(int64_t n_tasks, const std::function<void(int64_t)>& task) {
  if (n_tasks <= 0) return;
  if (workers_.empty() || n_tasks == 1) {
    for (int64_t i = 0; i < n_tasks; ++i) task(i);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    task_ = &task;
    n_tasks_ = n_tasks;
    next_task_.store(0, std::memory_order_relaxed);
    workers_done_ = 0;
    ++generation_;
  }
  work_cv_.notify_all();
  RunTasks();
  // Every task has been claimed; wait until every worker has finished its
  // part (the job lives on the caller's stack).
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return workers_done_ == static_cast<int>(workers_.size()); });
  task_ = nullptr;
}

void ThreadPool::ParallelForRange(int64_t n, const std::function<void(int64_t, int64_t)>& range) {
  if (n <= 0) return;
  const int64_t n_chunks = std::min<int64_t>(n, static_cast<int64_t>(size()) * 4);
  const int64_t per_chunk = (n + n_chunks - 1) / n_chunks;
  ParallelFor((n + per_chunk - 1) / per_chunk, [&](int64_t c) {
    const int64_t begin = c * per_chunk;
    range(begin, std::min(n, begin + per_chunk));
  });
}

}  // namespace octo::cpu
