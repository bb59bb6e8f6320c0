// An input stream buffer over a file descriptor (stdin) that another thread
// can end: after Interrupt(), a read in progress or to come sees end of
// input. octo-gen's signal watcher uses it so Ctrl-C ends a conversation
// waiting for the next line as cleanly as one generating.
#pragma once

#include <streambuf>

namespace octo {

class InterruptibleInput final : public std::streambuf {
 public:
  explicit InterruptibleInput(int fd);
  ~InterruptibleInput() override;
  InterruptibleInput(const InterruptibleInput&) = delete;
  InterruptibleInput& operator=(const InterruptibleInput&) = delete;

  // Ends input now; safe from any thread.
  void Interrupt();

 protected:
  int_type underflow() override;

 private:
  static constexpr int kBufferBytes = 4096;
  const int fd_;
  int wake_[2] = {-1, -1};  // a pipe: Interrupt writes, reads poll it beside fd_
  char buffer_[kBufferBytes];
};

}  // namespace octo
