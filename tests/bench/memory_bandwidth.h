// The memory bandwidth of this machine, measured in the same run as the
// engine, for the decode bound (engine_bench.cc).
//
// Two figures, each the best of `reps` passes over buffers much larger than
// the last-level cache, split into one contiguous slice per pool thread:
//   - memcpy: bytes copied per second. The memory moves twice that (each
//     byte is read once and written once; glibc's memcpy uses non-temporal
//     stores for copies this large, so there is no extra read for ownership).
//   - read scan: bytes read per second by a loop that only loads and adds,
//     which is the access pattern of decoding (weights are only read).
// "Best" (not median) because it is a ceiling: the fastest the memory was
// seen to go, so a bound built on it is never flattered by a slow rep.
#pragma once

#include <cstdint>

#include "kernels/cpu/thread_pool.h"

namespace octo::bench {

struct MemoryBandwidth {
  double copy_bytes_per_s = 0;  // bytes copied (each read once and written once)
  double read_bytes_per_s = 0;  // bytes read by the scan
  uint64_t buffer_bytes = 0;
  int reps = 0;
  int threads = 0;
};

// Allocates two buffers of `buffer_bytes` (touched before timing) and runs
// `reps` copies and `reps` scans on `pool`. reps >= 1.
MemoryBandwidth MeasureMemoryBandwidth(cpu::ThreadPool& pool, uint64_t buffer_bytes, int reps);

}  // namespace octo::bench
