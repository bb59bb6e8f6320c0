// The executor's interface to a running kernel: what the built-ins of
// device_api.h read, and the calls its barriers, warp operations and launches
// make into the executor (kernels/cuda/sim/*.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

namespace octo::cuda_sim {

// One block as its threads see it. Owned by the block runner, valid while
// the block runs.
struct BlockInfo {
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
  const char* kernel_name;
  unsigned char* dynamic_shared;  // the launch's shared_bytes, poisoned
};

// One GPU thread: set by the block runner each time it switches to the
// thread's fiber.
struct ThreadInfo {
  uint3 thread_idx;
  const BlockInfo* block;
  bool grid_started;  // it has called GridStart()
  bool prefetching;   // it runs GridStartAfter's prefetch, before GridStart()
};

// The GPU thread running on this host thread. Only meaningful inside a
// kernel: null elsewhere.
extern thread_local const ThreadInfo* tls_thread;

// common.cuh's GridStart(): the running thread is past its kernel's start.
void GridStart();
// The kernel fails: the running thread read a built-in before GridStart().
[[noreturn]] void BeforeGridStart();

// The running thread, for the built-ins (threadIdx, ...), which a kernel may
// read only after GridStart(), or in the prefetch GridStartAfter runs first.
inline const ThreadInfo& CurrentThread() {
  if (!tls_thread->grid_started && !tls_thread->prefetching) [[unlikely]] BeforeGridStart();
  return *tls_thread;
}

// common.cuh's GridStartAfter: the running thread's prefetch begins. Until
// GridStart() it may read its index and call PrefetchL2, nothing else the
// executor sees (a barrier, a warp operation or an async copy fails it).
void BeginPrefetch();

// common.cuh's PrefetchL2: the kernel fails unless [p, p + bytes) lies in
// one device allocation (a GPU would prefetch whatever the address holds; a
// range outside the weights is a wrong address). Recorded while
// RecordPrefetches is on.
void PrefetchL2(const void* p, size_t bytes, std::source_location site);

// One PrefetchL2 call, as a test reads it.
struct Prefetch {
  const void* p;
  size_t bytes;
  bool before_start;  // made in GridStartAfter's prefetch
};
// From now on, every kernel thread's PrefetchL2 is kept (on) or not (off,
// the default); TakePrefetches returns those kept and forgets them.
// Process-wide, thread-safe.
void RecordPrefetches(bool on);
std::vector<Prefetch> TakePrefetches();

// The start of the block's dynamic shared memory (the launch's shared_bytes).
inline unsigned char* DynamicSharedMemory() { return tls_thread->block->dynamic_shared; }

enum class BarrierKind : uint8_t { kSync, kCount, kAnd, kOr };
enum class WarpOp : uint8_t { kShflIdx, kShflUp, kShflDown, kShflXor, kBallot, kSync };

// __syncthreads and its _count/_and/_or forms: waits until every thread of
// the block has arrived at this same call site, then returns the count of
// threads whose predicate was non-zero (kCount), whether all (kAnd) or any
// (kOr) were, or 0 (kSync).
int BlockBarrier(BarrierKind kind, int predicate, std::source_location site);

// A warp operation: waits until every lane in `mask` has called one with the
// same mask, then returns this lane's result (a shuffled value's bits, or
// the ballot of the `value`s that are non-zero).
uint64_t WarpCollective(WarpOp op, unsigned mask, uint64_t value, int param, int width,
                        std::source_location site);

// "kernel K, block (x,y,z), thread (x,y,z)": the running GPU thread, for
// errors. Only inside a kernel.
std::string RunningThreadName();

// __trap(): the kernel fails with an error naming this thread and `site`.
[[noreturn]] void Trap(std::source_location site);

// The running thread's async copies (async_copy.h): a copy of 4, 8 or 16
// bytes between addresses aligned to that (else the kernel fails, naming
// the thread and `site`), a commit, a wait for all but `prior` groups.
void AsyncCopy(void* dst, const void* src, size_t bytes, size_t zero_fill, std::source_location site);
void AsyncCommit();
void AsyncWait(size_t prior);

// A launch as the executor queues it: the kernel's name and address (for
// errors, and to find the module holding its static shared memory), the
// configuration, and `invoke(packed)`, which runs the kernel body for the
// current thread.
struct KernelLaunch {
  const char* name;
  const void* kernel;
  dim3 grid;
  dim3 block;
  size_t shared_bytes;
  cudaStream_t stream;
  void (*invoke)(const void* packed);
  std::shared_ptr<const void> packed;
};

// Checks the configuration (cudaErrorInvalidConfiguration, kept for
// cudaGetLastError(), when it is out of range) and queues the launch.
void LaunchKernel(KernelLaunch launch);

}  // namespace octo::cuda_sim
