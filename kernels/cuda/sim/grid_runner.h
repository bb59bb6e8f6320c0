// Runs the blocks of a launch across host threads: a fixed set of workers
// plus the thread that asks (a stream's own thread), each running one block
// at a time with its own BlockRunner. Blocks are handed out from a shared
// counter, in a fixed order that is not index order (grid_runner.cc's
// BlockAt); after the first block that fails, no new block starts.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "kernels/cuda/sim/thread_context.h"

namespace octo::cuda_sim {

class GridRunner {
 public:
  // `host_threads` counts the caller of Run: host_threads - 1 workers.
  explicit GridRunner(int host_threads);
  ~GridRunner();
  GridRunner(const GridRunner&) = delete;
  GridRunner& operator=(const GridRunner&) = delete;

  int host_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs every block of `launch`; returns "" or the first block's error.
  // Several threads (streams) may call it at once; their grids share the
  // workers.
  std::string Run(const KernelLaunch& launch);

 private:
  struct Grid;
  void WorkerLoop();
  static void RunBlocks(Grid& grid);

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Grid*> grids_ ABSL_GUARDED_BY(mu_);  // grids with blocks left
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

// Gives the calling host thread an alternate signal stack (once), so the
// fault handler can report a fiber's stack overflow.
void EnsureSignalStack();

}  // namespace octo::cuda_sim
