// ThreadPool: the one pool the CPU backend splits work across.
//
// Created once (by the engine, sized to the cores) and passed to the ops that
// need it inside cpu::Exec (kernels/ops.h). ParallelFor hands out task
// indices [0, n_tasks) to the workers and the calling thread, and returns
// when every task has run. Tasks are claimed dynamically (an atomic counter),
// so which thread runs a task varies from call to call: an op must make each
// output depend only on its task index, never on the thread or the order, so
// that results are the same for any pool size (the ops' tests check this).
//
// Thread safety: ParallelFor may be called by one thread at a time (the
// engine's forward pass); calls from several threads at once are serialized.
// A task must not call ParallelFor on the same pool. Tasks must not throw.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace octo::cpu {

class ThreadPool {
 public:
  // n_threads counts the caller: 1 runs everything on the calling thread.
  // Values < 1 mean "one per core" (std::thread::hardware_concurrency()).
  explicit ThreadPool(int n_threads);
  ~ThreadPool();  // joins the workers
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs task(i) for every i in [0, n_tasks), on the workers and the caller.
  void ParallelFor(int64_t n_tasks, const std::function<void(int64_t task)>& task);

  // Convenience: splits [0, n) into about size() * 4 contiguous ranges and
  // runs range(begin, end) on each.
  void ParallelForRange(int64_t n, const std::function<void(int64_t begin, int64_t end)>& range);

 private:
  void WorkerLoop();
  void RunTasks();  // claims tasks of the current job until none are left

  std::mutex call_mu_;  // serializes ParallelFor callers
  std::mutex mu_;
  std::condition_variable work_cv_;  // a new job (or shutdown) for the workers
  std::condition_variable done_cv_;  // the last worker finished the current job
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // Workers that have finished the current job. ParallelFor returns only
  // when all have: every worker takes part in every job, so none can still
  // be inside an old job when the next one is set up.
  int workers_done_ ABSL_GUARDED_BY(mu_) = 0;

  // The current job. Written by the caller under mu_ before generation_
  // advances; read by the workers after they see the new generation (under
  // mu_), and not written again until every worker has finished it.
  const std::function<void(int64_t)>* task_ = nullptr;
  int64_t n_tasks_ = 0;
  std::atomic<int64_t> next_task_{0};

  std::vector<std::thread> workers_;
};

}  // namespace octo::cpu
