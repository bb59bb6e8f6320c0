// Runs one block of a kernel on the calling host thread: each GPU thread is
// a fiber (Boost.Context) that runs until it must wait (a barrier, a warp
// operation) or ends, and then hands the host thread straight to the next
// GPU thread that can go on, first come first served.
//
// What a GPU would hang on, or do silently wrong, is an error here, naming
// the kernel, the block and the thread:
//  - a thread that ends while others wait for it at a __syncthreads, or
//    arrives at one after another thread has ended (every thread of a block
//    must reach every barrier);
//  - threads waiting at two different __syncthreads (call sites);
//  - a warp operation whose mask names a lane the block does not have, a
//    lane that has ended, or leaves out the calling lane; a shuffle reading
//    a lane outside its mask;
//  - threads that can no longer move (some at a barrier, some at a warp
//    operation, or lanes waiting on each other under different masks).
// The other threads of a failed block are unwound; the launch's remaining
// blocks are not run.
//
// Shared memory starts every block filled with kSharedPoison: the launch's
// dynamic shared memory, and the static __shared__ variables of the module
// (shared library) holding the kernel (see device_api.h).
//
// One runner per host thread (it owns that thread's pooled fiber stacks);
// not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>
#include <vector>

#include <boost/context/fiber.hpp>

#include "kernels/cuda/sim/async_copy.h"
#include "kernels/cuda/sim/thread_context.h"

namespace octo::cuda_sim {

// The byte shared memory is filled with before a block starts: every float,
// half and double made of it is a NaN, every integer -1.
inline constexpr unsigned char kSharedPoison = 0xFF;

class BlockRunner {
 public:
  BlockRunner();
  ~BlockRunner();
  BlockRunner(const BlockRunner&) = delete;
  BlockRunner& operator=(const BlockRunner&) = delete;

  // Runs every thread of block `block_idx` of `launch` to its end, with
  // `dynamic_shared` (launch.shared_bytes) as the block's dynamic shared
  // memory. Returns "" when every thread ended, else the error.
  std::string Run(const KernelLaunch& launch, uint3 block_idx, unsigned char* dynamic_shared);

  // The runner running a block on this host thread, or null.
  static BlockRunner* Current();

  // For the running GPU thread; see thread_context.h.
  int Barrier(BarrierKind kind, int predicate, std::source_location site);
  uint64_t Warp(WarpOp op, unsigned mask, uint64_t value, int param, int width, std::source_location site);
  [[noreturn]] void Fail(const std::string& what);
  void MarkGridStarted() {
    threads_[current_].info.grid_started = true;
    threads_[current_].info.prefetching = false;
  }
  void MarkPrefetching() { threads_[current_].info.prefetching = true; }
  // Fails the running thread unless it has called GridStart(): before it, a
  // thread only reads its index and prefetches (GridStartAfter).
  void RequireGridStarted(const char* what, std::source_location site);
  AsyncCopies& Copies() { return threads_[current_].copies; }

 private:
  enum class State : uint8_t { kUnstarted, kReady, kRunning, kAtBarrier, kAtWarp, kDone };
  struct Thread {
    ThreadInfo info{};
    boost::context::fiber fiber;
    State state = State::kUnstarted;
    std::source_location site;  // where it waits
    // Its part in a pending warp operation.
    WarpOp op = WarpOp::kSync;
    unsigned mask = 0;
    uint64_t value = 0;
    int param = 0;
    int width = 32;
    uint64_t result = 0;
    void* asan_fake_stack = nullptr;
    AsyncCopies copies;
  };
  // Lanes of one warp waiting at a warp operation with the same mask.
  struct WarpGroup {
    unsigned mask;
    unsigned arrived;
    WarpOp op;
  };
  // A warp's pending groups: a lane waits in at most one, so at most 32.
  struct WarpGroups {
    int n = 0;
    WarpGroup group[32];
  };
  struct Stack {
    void* map = nullptr;  // guard page + usable bytes
    size_t map_bytes = 0;
    void* bottom = nullptr;  // lowest usable byte
    size_t bytes = 0;
  };

  // Run()'s own context, as a switch target.
  static constexpr int kLoop = -1;

  void Start(int t);
  int PopReady();  // the next ready thread, or kLoop if none
  // Switches from the running context (thread current_, or Run()'s loop) to
  // `next` (a thread, or kLoop); returns when something switches back.
  void SwitchTo(int next);
  // The two halves of a switch: the target's continuation (set up to run),
  // and, on arrival, keeping the continuation of the context left behind.
  boost::context::fiber Depart(int next, void** fake_stack);
  void Arrived(void* fake_stack, boost::context::fiber&& from);
  void Yield();  // the running GPU thread waits: on to the next ready one
  void ThreadBody(int t);
  void OnExit(int t);
  void MakeReady(int t);
  void CompleteWarpGroup(int warp, const WarpGroup& group);
  void UnwindSuspended();
  void PoisonSharedMemory(const KernelLaunch& launch, unsigned char* dynamic_shared);
  std::string Stuck() const;
  std::string Describe(int t) const;
  std::string ThreadName(int t) const;
  Stack& StackFor(int t);

  const KernelLaunch* launch_ = nullptr;
  BlockInfo block_{};
  int n_threads_ = 0;
  std::vector<Thread> threads_;
  std::vector<int> ready_;  // FIFO ring of n_threads_ entries
  size_t ready_head_ = 0, ready_size_ = 0;
  int current_ = kLoop;
  int resumer_ = kLoop;  // who made the latest switch
  int done_ = 0;
  int exited_ = 0;        // threads that ended normally
  int first_exited_ = -1;
  // The barrier being gathered.
  int barrier_count_ = 0;
  std::source_location barrier_site_;
  BarrierKind barrier_kind_ = BarrierKind::kSync;
  int barrier_first_ = -1;
  int barrier_acc_ = 0;
  int barrier_result_ = 0;
  // Per warp: pending groups, and the lanes that have ended.
  std::vector<WarpGroups> groups_;
  std::vector<unsigned> exited_lanes_;
  std::string error_;
  bool aborting_ = false;
  boost::context::fiber loop_;  // Run()'s loop, while GPU threads run
  std::vector<Stack> stacks_;
  // AddressSanitizer's view of Run()'s own stack (fiber switches are announced).
  const void* loop_stack_bottom_ = nullptr;
  size_t loop_stack_bytes_ = 0;
  void* loop_fake_stack_ = nullptr;
};

}  // namespace octo::cuda_sim
