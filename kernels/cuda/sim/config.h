// Settings of the host executor (OCTO_CUDA_SIM builds). The defaults suit
// the tests; octod and the benchmarks may set them before their first CUDA
// call. The environment sets them at start too: OCTO_SIM_DEVICE_MEMORY
// (bytes), OCTO_SIM_COPY_DELAY_US (microseconds) and OCTO_SIM_PINNABLE_MEMORY
// (bytes), so a test can run a whole octod on a small or slow device, or on
// a host that cannot pin its layers.
#pragma once

#include <chrono>
#include <cstddef>

#include "absl/status/status.h"

namespace octo::cuda_sim {

struct Config {
  // cudaMemGetInfo's total; a cudaMalloc past it fails with
  // cudaErrorMemoryAllocation.
  size_t device_memory_bytes = size_t{8} << 30;
  // How long every asynchronous copy and memset stays in flight before its
  // bytes land. Its destination is inaccessible meanwhile, so a kernel that
  // reads it without waiting on the copy faults (device_memory.h). 0 lands
  // copies as soon as their stream reaches them.
  std::chrono::microseconds copy_delay{1000};
  // The most host memory cudaHostRegister pins at once (a memlock limit, a
  // container's); a registration past it fails with
  // cudaErrorMemoryAllocation and the memory stays pageable.
  size_t pinnable_bytes = ~size_t{0};
  // Host threads running blocks, counting the launching stream's own; 0 is
  // one per core. Fixed by the first launch.
  int host_threads = 0;
};

Config GetConfig();

// INVALID_ARGUMENT for a negative delay or thread count; FAILED_PRECONDITION
// for a device size below what is allocated, or host_threads changed after
// the first launch.
absl::Status SetConfig(const Config& config);

}  // namespace octo::cuda_sim
