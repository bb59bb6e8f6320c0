#include "daemon/loader/loader_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "storage/ring_format.h"

extern char** environ;

namespace octo {
namespace {

// The loader's end of the control socket, as its command line says (--fd).
constexpr int kLoaderControlFd = 3;

int PollMillis(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(absl::Ceil(d, absl::Milliseconds(1))), 1 << 30));
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  return "ended";
}

bool SendMessage(int fd, ring::MessageType type) {
  ring::RingMessage m{};
  m.type = type;
  ssize_t n;
  do {
    n = ::send(fd, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  // A full socket means the loader has doorbells it has not read yet: enough.
  return n == static_cast<ssize_t>(sizeof(m)) || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

// posix_spawn's file actions and attributes, destroyed on every path.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<LoaderProcess>> LoaderProcess::Spawn(const LoaderSpawnOptions& options) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot create the loader's socket: ", std::strerror(errno)));
  }
  // dup2 onto the same number would keep close-on-exec set: move it first.
  if (fds[1] == kLoaderControlFd) {
    const int moved = ::fcntl(fds[1], F_DUPFD_CLOEXEC, kLoaderControlFd + 1);
    ::close(fds[1]);
    fds[1] = moved;
  }
  std::vector<std::string> args = {options.loader_path,
                                   "--ring", options.ring_name,
                                   "--model-dir", options.model_dir,
                                   "--fd", std::to_string(kLoaderControlFd),
                                   "--direct-io", options.direct_io ? "true" : "false",
                                   "--queue-depth", std::to_string(options.queue_depth)};
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t pid = 0;
  int err;
  {
    SpawnSetup setup;
    // The child keeps stdout/stderr (its errors go to octod's log) and gets
    // its socket end as fd 3, stdin from /dev/null, nothing else of ours.
    posix_spawn_file_actions_adddup2(&setup.actions, fds[1], kLoaderControlFd);
    posix_spawn_file_actions_addopen(&setup.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&setup.actions, kLoaderControlFd + 1);
    // Default signal handling and no blocked signals, whatever octod set;
    // its own process group, so a terminal's ^C reaches octod, which then
    // stops the loader in order.
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&setup.attr, &none);
    posix_spawnattr_setsigdefault(&setup.attr, &all);
    posix_spawnattr_setpgroup(&setup.attr, 0);
    posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    err = ::posix_spawn(&pid, options.loader_path.c_str(), &setup.actions, &setup.attr, argv.data(), environ);
  }
  ::close(fds[1]);
  if (err != 0) {
    ::close(fds[0]);
    return absl::UnavailableError(
        absl::StrCat("cannot start octo-loader ", options.loader_path, ": ", std::strerror(err)));
  }
  const int pid_fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  std::unique_ptr<LoaderProcess> loader(new LoaderProcess(pid, fds[0], pid_fd));

  const absl::Time deadline = absl::Now() + kLoaderHelloTimeout;
  while (true) {
    pollfd pfd{loader->socket_fd_, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, PollMillis(deadline - absl::Now()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      loader->KillAndReap();
      return absl::UnavailableError(absl::StrCat("octo-loader (pid ", pid, ") did not attach to ring ",
                                                 options.ring_name, " within ", absl::FormatDuration(kLoaderHelloTimeout)));
    }
    ring::RingMessage m{};
    const ssize_t n = ::recv(loader->socket_fd_, &m, sizeof(m), 0);
    if (n < 0 && errno == EINTR) continue;
    m.text[sizeof(m.text) - 1] = '\0';
    if (n > 0 && m.type == ring::kHello) {
      loader->io_mode_ = m.text;
      return loader;
    }
    if (n > 0 && m.type != ring::kStartFailed) continue;
    const std::string how = loader->KillAndReap();
    if (n > 0) return absl::UnavailableError(absl::StrCat("octo-loader could not start: ", m.text));
    return absl::UnavailableError(absl::StrCat("octo-loader (pid ", pid, ") ", how, " before attaching to the ring"));
  }
}

LoaderProcess::~LoaderProcess() { Stop(); }

bool LoaderProcess::Notify() { return !reaped_ && SendMessage(socket_fd_, ring::kDoorbell); }

bool LoaderProcess::Drain() {
  while (!reaped_) {
    ring::RingMessage m{};
    const ssize_t n = ::recv(socket_fd_, &m, sizeof(m), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false;  // end of file: the loader is gone
    m.text[sizeof(m.text) - 1] = '\0';
    if (m.type == ring::kCompleted && m.text[0] != '\0') io_mode_ = m.text;  // e.g. O_DIRECT refused since
  }
  return false;
}

LoaderProcess::Event LoaderProcess::Wait(absl::Duration timeout, int stop_fd) {
  if (reaped_) return Event::kDied;
  pollfd pfds[3];
  nfds_t count = 0;
  pfds[count++] = {socket_fd_, POLLIN, 0};
  pollfd* death = pid_fd_ >= 0 ? &(pfds[count++] = {pid_fd_, POLLIN, 0}) : nullptr;
  pollfd* stop = stop_fd >= 0 ? &(pfds[count++] = {stop_fd, POLLIN, 0}) : nullptr;
  const int ready = ::poll(pfds, count, PollMillis(timeout));
  if (ready <= 0) return Event::kTimeout;  // EINTR included: the caller looks again
  if (stop != nullptr && stop->revents != 0) return Event::kStopped;
  const bool died = death != nullptr && death->revents != 0;
  if (pfds[0].revents != 0) {
    // Completions sent before a death still count; the ring is the truth.
    if (!Drain()) return Event::kDied;
    if (!died) return Event::kCompleted;
  }
  return died ? Event::kDied : Event::kTimeout;
}

bool LoaderProcess::Reap(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!reaped_) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, timeout == absl::InfiniteDuration() ? 0 : WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {  // ECHILD: someone ignores SIGCHLD; it is gone
      reaped_ = true;
      wait_status_ = status;
      break;
    }
    if (r < 0 && errno == EINTR) continue;
    if (absl::Now() >= deadline) return false;
    if (pid_fd_ >= 0) {
      pollfd pfd{pid_fd_, POLLIN, 0};
      ::poll(&pfd, 1, PollMillis(deadline - absl::Now()));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  CloseFds();
  return true;
}

std::string LoaderProcess::KillAndReap() {
  if (!reaped_) {
    ::kill(pid_, SIGKILL);
    Reap(absl::InfiniteDuration());
  }
  return DescribeWaitStatus(wait_status_);
}

void LoaderProcess::Stop() {
  if (reaped_) return;
  SendMessage(socket_fd_, ring::kStop);
  if (!Reap(kLoaderStopGrace)) KillAndReap();
}

void LoaderProcess::CloseFds() {
  if (socket_fd_ >= 0) ::close(socket_fd_);
  if (pid_fd_ >= 0) ::close(pid_fd_);
  socket_fd_ = pid_fd_ = -1;
}

}  // namespace octo
