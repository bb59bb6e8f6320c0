#include "kernels/cuda/sim/grid_runner.h"

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "kernels/cuda/sim/block_runner.h"

namespace octo::cuda_sim {

struct GridRunner::Grid {
  const KernelLaunch* launch;
  uint64_t n_blocks;
  uint64_t stride;  // BlockAt's
  std::atomic<uint64_t> next{0};
  std::atomic<int> helpers{0};  // workers inside RunBlocks for this grid
  std::mutex mu;
  std::string error;  // the first block's error
};

void EnsureSignalStack() {
  // AddressSanitizer gives every thread an alternate stack of its own (and
  // unmaps whatever alternate stack a thread has when it exits).
#if !defined(__SANITIZE_ADDRESS__)
  thread_local std::vector<unsigned char> stack;
  if (!stack.empty()) return;
  stack.resize(256 * 1024);
  stack_t ss{};
  ss.ss_sp = stack.data();
  ss.ss_size = stack.size();
  sigaltstack(&ss, nullptr);
#endif
}

GridRunner::GridRunner(int host_threads) {
  for (int i = 1; i < host_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

GridRunner::~GridRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

namespace {

// The linear index of the b-th block to start of a grid of n blocks. Not
// index order: a GPU promises none, and a kernel whose blocks rely on one
// (a count of finished blocks that takes grid.y's rows to finish one after
// another, say) must fail here as it may there. Consecutive starts lie a
// prime stride apart (mod n), which visits every block once as long as the
// prime does not divide n: StrideFor(n) picks it, BlockAt steps by it.
uint64_t StrideFor(uint64_t n) {
  for (uint64_t p : {7919, 104729, 1299709}) {
    if (n % p != 0) return p;
  }
  return 1;
}
uint64_t BlockAt(uint64_t b, uint64_t n, uint64_t stride) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(b) * stride % n);
}

}  // namespace

void GridRunner::RunBlocks(Grid& grid) {
  EnsureSignalStack();
  thread_local BlockRunner runner;
  thread_local std::vector<unsigned char> dynamic_shared;
  const KernelLaunch& launch = *grid.launch;
  if (dynamic_shared.size() < launch.shared_bytes) dynamic_shared.resize(launch.shared_bytes);
  const uint64_t gx = launch.grid.x, gy = launch.grid.y;
  for (uint64_t next = grid.next++; next < grid.n_blocks; next = grid.next++) {
    const uint64_t b = BlockAt(next, grid.n_blocks, grid.stride);
    const uint3 block_idx{static_cast<unsigned>(b % gx), static_cast<unsigned>((b / gx) % gy),
                          static_cast<unsigned>(b / (gx * gy))};
    std::string error = runner.Run(launch, block_idx, dynamic_shared.data());
    if (!error.empty()) {
      std::lock_guard<std::mutex> lock(grid.mu);
      if (grid.error.empty()) grid.error = std::move(error);
      grid.next = grid.n_blocks;  // start no more blocks
    }
  }
}

std::string GridRunner::Run(const KernelLaunch& launch) {
  Grid grid;
  grid.launch = &launch;
  grid.n_blocks = static_cast<uint64_t>(launch.grid.x) * launch.grid.y * launch.grid.z;
  grid.stride = StrideFor(grid.n_blocks);
  if (grid.n_blocks > 1 && !workers_.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    grids_.push_back(&grid);
    cv_.notify_all();
  }
  RunBlocks(grid);
  {
    // No block is left to start; wait for the workers still in one.
    std::unique_lock<std::mutex> lock(mu_);
    std::erase(grids_, &grid);
    cv_.wait(lock, [&] { return grid.helpers.load() == 0; });
  }
  return grid.error;
}

void GridRunner::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    Grid* grid = nullptr;
    cv_.wait(lock, [&] {
      if (stop_) return true;
      for (Grid* g : grids_) {
        if (g->next.load() < g->n_blocks) {
          grid = g;
          return true;
        }
      }
      return false;
    });
    if (stop_) return;
    ++grid->helpers;
    lock.unlock();
    RunBlocks(*grid);
    lock.lock();
    --grid->helpers;
    cv_.notify_all();
  }
}

}  // namespace octo::cuda_sim
