#include "tests/client/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>

namespace octo::testing {
namespace {

[[noreturn]] void Exec(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Reads both fds until both reach EOF (or EIO, as a pty does).
void Drain(int fd_a, std::string* a, int fd_b, std::string* b) {
  pollfd fds[2] = {{fd_a, POLLIN, 0}, {fd_b, POLLIN, 0}};
  int open = fd_b >= 0 ? 2 : 1;
  char buf[4096];
  while (open > 0) {
    if (poll(fds, fd_b >= 0 ? 2 : 1, -1) < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        (i == 0 ? a : b)->append(buf, n);
      } else {
        fds[i].fd = -1;
        --open;
      }
    }
  }
}

}  // namespace

RunResult RunCommand(const std::vector<std::string>& argv) {
  int out_pipe[2], err_pipe[2];
  // Close-on-exec: a child started by another test thread at the same
  // moment must not hold these open (this Drain would wait for it).
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) std::abort();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    close(out_pipe[0]);
    close(err_pipe[0]);
    Exec(argv);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  RunResult result;
  Drain(out_pipe[0], &result.out, err_pipe[0], &result.err);
  close(out_pipe[0]);
  close(err_pipe[0]);
  result.exit_code = WaitCommand(pid);
  return result;
}

RunResult RunOnTerminal(const std::vector<std::string>& argv) {
  int master = -1;
  pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  if (pid == 0) Exec(argv);
  RunResult result;
  Drain(master, &result.out, -1, nullptr);
  close(master);
  result.exit_code = WaitCommand(pid);
  return result;
}

TerminalRun::TerminalRun(const std::vector<std::string>& argv) {
  pid_ = forkpty(&master_, nullptr, nullptr, nullptr);
  if (pid_ == 0) Exec(argv);
}

TerminalRun::~TerminalRun() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    WaitCommand(pid_);
  }
  if (master_ >= 0) close(master_);
}

void TerminalRun::Type(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(master_, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

void TerminalRun::ReadSome(int timeout_ms) {
  pollfd p{master_, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return;
  char buffer[4096];
  const ssize_t n = read(master_, buffer, sizeof(buffer));
  if (n > 0) out_.append(buffer, static_cast<size_t>(n));
}

bool TerminalRun::WaitFor(const std::string& text, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    if (const size_t at = out_.find(text, seen_); at != std::string::npos) {
      seen_ = at + text.size();
      return true;
    }
    if (std::chrono::steady_clock::now() >= end) return false;
    ReadSome(50);
  }
}

int TerminalRun::Wait() {
  std::string rest;
  Drain(master_, &rest, -1, nullptr);
  out_ += rest;
  const int code = WaitCommand(pid_);
  pid_ = -1;
  return code;
}

pid_t StartCommand(const std::vector<std::string>& argv) {
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, STDOUT_FILENO);
    dup2(devnull, STDERR_FILENO);
    Exec(argv);
  }
  return pid;
}

int WaitCommand(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return ExitCode(status);
}

std::string StatusCodeNameIn(const std::string& text) {
  for (const char* name : {"CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                           "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
                           "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}) {
    if (text.find(name) != std::string::npos) return name;
  }
  return "";
}

}  // namespace octo::testing
