// ReadQueue: positional reads kept in flight, the loader's seam for I/O (as
// LevelDB's Env is for files). The real queues are io_uring and, where the
// kernel refuses io_uring, a pool of threads calling pread; tests wrap one in
// a queue that shortens, delays or fails reads (tests/storage).
//
// A queue never retries anything itself: a completion carries exactly what
// the kernel said (bytes, 0 at end of file, or -errno), and the caller
// (DirectReader) decides.
//
// Threading: one thread uses a queue at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/statusor.h"

namespace octo {

class ReadQueue {
 public:
  struct Completion {
    uint64_t tag = 0;    // as given to Submit
    int64_t result = 0;  // bytes read (may be fewer than asked), 0 at end of file, or -errno
  };

  virtual ~ReadQueue() = default;

  // "io_uring", "threads", ...: the first half of the loader's io mode.
  virtual const char* name() const = 0;
  // The most reads this queue keeps in flight; Submit beyond it is a
  // programmer error (FAILED_PRECONDITION).
  virtual uint32_t depth() const = 0;

  // Starts reading dest.size() bytes at `offset` of `fd` into `dest`. The
  // read may run until its completion is returned by Wait; `dest` and `fd`
  // must stay valid until then.
  virtual absl::Status Submit(int fd, uint64_t offset, std::span<uint8_t> dest, uint64_t tag) = 0;

  // Blocks until one submitted read finishes and returns it.
  // FAILED_PRECONDITION if nothing is in flight.
  virtual absl::StatusOr<Completion> Wait() = 0;
};

// io_uring with `depth` entries. UNAVAILABLE when the kernel refuses io_uring
// (too old, disabled by sysctl or a seccomp filter).
absl::StatusOr<std::unique_ptr<ReadQueue>> MakeUringReadQueue(uint32_t depth);

// `depth` threads, each running one pread at a time.
std::unique_ptr<ReadQueue> MakeThreadReadQueue(uint32_t depth);

// io_uring if the kernel allows it, else threads.
std::unique_ptr<ReadQueue> MakeBestReadQueue(uint32_t depth);

}  // namespace octo
