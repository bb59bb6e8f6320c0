// The executor's device memory: host memory, counted against the configured
// device size, laid out so that misuse faults instead of passing by luck.
//
//  - Every allocation is its own mapping, 256-byte aligned as cudaMalloc's,
//    filled with 0xFF (uninitialised device memory reads as NaN / -1), and
//    followed by an inaccessible guard page; under AddressSanitizer the
//    bytes between its end and the guard page are poisoned too, so a read
//    one element past the end is reported.
//  - While an asynchronous copy is in flight, the whole pages of its
//    destination are inaccessible (and of a device source, read-only): a
//    kernel or copy that touches them without waiting for the copy faults,
//    and the fault handler names the thread and the copy.
//  - Host memory from cudaMallocHost or cudaHostRegister is "pinned": a copy
//    from it is truly asynchronous. From any other host memory a copy to the
//    device reads its source at once, and one to it completes before the
//    call returns, as CUDA does with pageable memory.
//
// Thread-safe. The fault handler reads the tables without the lock (it
// cannot wait), which is safe for the report it prints before the process
// dies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/base/thread_annotations.h"

namespace octo::cuda_sim {

class DeviceMemory {
 public:
  explicit DeviceMemory(size_t capacity);

  // cudaMalloc: cudaErrorMemoryAllocation past the capacity.
  cudaError_t Allocate(size_t bytes, void** out);
  // cudaFree: `p` must be an allocation's start (or null).
  cudaError_t Free(void* p);

  size_t capacity() const;
  size_t used() const;
  // FAILED to shrink below what is allocated: returns false.
  bool SetCapacity(size_t bytes);

  // Whether [p, p + bytes) lies inside one allocation.
  bool IsDeviceRange(const void* p, size_t bytes) const;
  // Whether p points into any allocation (including its guard).
  bool IsDevicePointer(const void* p) const;

  // Pinned host memory.
  cudaError_t AllocateHost(size_t bytes, void** out);
  cudaError_t FreeHost(void* p);
  // cudaErrorMemoryAllocation when the registered bytes would pass `limit`.
  cudaError_t Register(void* p, size_t bytes, size_t limit);
  cudaError_t Unregister(void* p);
  bool IsPinned(const void* p, size_t bytes) const;
  // Whether [p, p + bytes) starts in pinned memory and runs past its end: a
  // GPU refuses such a copy (cudaErrorInvalidValue, seen on an H100).
  bool RunsPastPinned(const void* p, size_t bytes) const;

  // An asynchronous copy (or memset) in flight: protects the whole pages of
  // `dst` (no access) and of a device `src` (read only) until Land().
  struct InFlight {
    uintptr_t dst_begin = 0, dst_end = 0;  // page-aligned, may be empty
    uintptr_t src_begin = 0, src_end = 0;
    std::string what;
  };
  int TakeOff(void* dst, const void* src, size_t bytes, std::string what);
  void Land(int id);

  // What `address` is, for the fault handler: empty if the executor knows
  // nothing of it.
  std::string ExplainFault(uintptr_t address) const;

 private:
  struct Allocation {
    uintptr_t begin;
    size_t bytes;
    size_t map_bytes;  // usable pages + the guard page
  };
  void Reprotect(uintptr_t begin, uintptr_t end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The last pinned range [start, end) that starts at or before `begin`, or
  // {0, 0}.
  std::pair<uintptr_t, uintptr_t> PinnedRangeFrom(uintptr_t begin) const ABSL_LOCKS_EXCLUDED(mu_);

  mutable std::mutex mu_;
  size_t capacity_ ABSL_GUARDED_BY(mu_);
  size_t used_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uintptr_t, Allocation> allocations_ ABSL_GUARDED_BY(mu_);  // by begin
  std::map<uintptr_t, size_t> pinned_ ABSL_GUARDED_BY(mu_);           // begin -> bytes
  std::set<uintptr_t> host_allocated_ ABSL_GUARDED_BY(mu_);          // cudaMallocHost'd begins
  std::map<int, InFlight> in_flight_ ABSL_GUARDED_BY(mu_);
  int next_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace octo::cuda_sim
