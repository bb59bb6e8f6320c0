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

// A command on a pseudo-terminal (stdin, stdout and stderr: isatty is true
// for all three) that a test types into as a person would: lines, and
// Ctrl-C as the terminal's interrupt character (the line discipline turns it
// into SIGINT for the command).
class TerminalRun {
 public:
  explicit TerminalRun(const std::vector<std::string>& argv);
  ~TerminalRun();  // kills the command if it still runs
  TerminalRun(const TerminalRun&) = delete;
  TerminalRun& operator=(const TerminalRun&) = delete;

  void Type(const std::string& text);  // "hello\n"
  void CtrlC() { Type("\x03"); }
  // Reads output until `text` appears after what earlier waits consumed
  // (true), or `seconds` pass (false).
  bool WaitFor(const std::string& text, double seconds = 30);
  const std::string& output() const { return out_; }  // everything so far
  int Wait();  // the exit code, once the command ends (reads the rest)

 private:
  void ReadSome(int timeout_ms);
  int master_ = -1;
  pid_t pid_ = -1;
  std::string out_;
  size_t seen_ = 0;  // out_ before this is consumed by WaitFor
};

// Starts `argv` with output discarded; returns the pid.
pid_t StartCommand(const std::vector<std::string>& argv);
// Waits for `pid`; returns the exit code as RunResult::exit_code does.
int WaitCommand(pid_t pid);

// The status code name `text` shows ("NOT_FOUND", "DATA_LOSS", ...), or ""
// when it shows none: the clients' messages are for people and carry none.
std::string StatusCodeNameIn(const std::string& text);

}  // namespace octo::testing
