// LoaderProcess: one octo-loader child, seen from octod. Spawns it on a ring
// (posix_spawn; the child gets only stdin from /dev/null, stdout, stderr and
// its end of the control socket as fd 3), waits for its hello, rings its
// doorbell, and notices its death through the socket's end of file and a
// pidfd. Protocol: storage/RING.md.
//
// Threading: one thread at a time (LayerStream's caller).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace octo {

// How long a new loader may take to attach to the ring and say hello.
inline constexpr absl::Duration kLoaderHelloTimeout = absl::Seconds(10);
// How long a stopped loader may take to exit before it is killed.
inline constexpr absl::Duration kLoaderStopGrace = absl::Seconds(2);

struct LoaderSpawnOptions {
  std::string loader_path;            // the octo-loader executable
  std::string ring_name;              // the ring it attaches to
  std::string model_dir;
  bool direct_io = true;
  uint32_t queue_depth = 8;
  std::vector<std::string> extra_args;  // appended to its command line
};

class LoaderProcess {
 public:
  // Spawns the loader and waits for its hello. UNAVAILABLE when it cannot be
  // started, exits or reports an error (its message included) before the
  // hello, or says nothing within kLoaderHelloTimeout.
  static absl::StatusOr<std::unique_ptr<LoaderProcess>> Spawn(const LoaderSpawnOptions& options);

  LoaderProcess(const LoaderProcess&) = delete;
  LoaderProcess& operator=(const LoaderProcess&) = delete;
  // Stop() unless already reaped.
  ~LoaderProcess();

  int pid() const { return pid_; }
  // From the hello, then from the latest completion (the loader falls back
  // to buffered reads when the file system refuses O_DIRECT).
  const std::string& io_mode() const { return io_mode_; }

  // Tells the loader there are new requests. False when it is gone.
  bool Notify();

  enum class Event { kTimeout, kCompleted, kDied, kStopped };
  // Waits up to `timeout` for a completion message or the loader's death,
  // and reads every message waiting; kStopped as soon as `stop_fd` (when
  // >= 0: StopSignal's) is readable.
  Event Wait(absl::Duration timeout, int stop_fd = -1);
  // Reads messages already waiting without blocking; false if the loader is gone.
  bool Drain();

  // SIGKILL, then waits for the process: when this returns the loader no
  // longer exists, so nothing writes into the ring any more (io_uring
  // requests of a dying process complete before it is reaped). Returns how
  // it ended, e.g. "killed by signal 9" or "exited with status 2".
  std::string KillAndReap();

  // Asks the loader to exit (kStop), waits up to kLoaderStopGrace, then kills.
  void Stop();

 private:
  LoaderProcess(pid_t pid, int socket_fd, int pid_fd) : pid_(pid), socket_fd_(socket_fd), pid_fd_(pid_fd) {}
  // Waits for the process to end for up to `timeout`; true once reaped.
  bool Reap(absl::Duration timeout);
  void CloseFds();

  pid_t pid_;
  int socket_fd_;
  int pid_fd_;             // -1 where pidfd_open is unavailable
  bool reaped_ = false;
  int wait_status_ = 0;
  std::string io_mode_;
};

}  // namespace octo
