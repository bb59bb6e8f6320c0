// Runs a command-line tool as a real child process, for end-to-end tests of
// octo-ctl: exit code, stdout and stderr, optionally on a pseudo-terminal.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace octo::testing {

struct RunResult {
  int exit_code = -1;  // 128 + signal when killed by a signal
  std::string out;     // stdout (stdout and stderr together with a pty)
  std::string err;     // stderr
};

// Runs `argv` to completion, capturing stdout and stderr through pipes.
RunResult RunCommand(const std::vector<std::string>& argv);

// Runs `argv` with stdout and stderr on a pseudo-terminal (isatty is true).
RunResult RunOnTerminal(const std::vector<std::string>& argv);

// Starts `argv` with output discarded; returns the pid.
pid_t StartCommand(const std::vector<std::string>& argv);
// Waits for `pid`; returns the exit code as RunResult::exit_code does.
int WaitCommand(pid_t pid);

}  // namespace octo::testing
