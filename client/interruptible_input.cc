#include "client/interruptible_input.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace octo {

InterruptibleInput::InterruptibleInput(int fd) : fd_(fd) {
  if (::pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;  // then Interrupt cannot wake a read
  setg(buffer_, buffer_, buffer_);
}

InterruptibleInput::~InterruptibleInput() {
  if (wake_[0] >= 0) ::close(wake_[0]);
  if (wake_[1] >= 0) ::close(wake_[1]);
}

void InterruptibleInput::Interrupt() {
  const char byte = 1;
  if (wake_[1] >= 0) (void)!::write(wake_[1], &byte, 1);
}

InterruptibleInput::int_type InterruptibleInput::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
  while (true) {
    const int ready = ::poll(fds, wake_[0] >= 0 ? 2 : 1, -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0 || (fds[1].revents & POLLIN) != 0) return traits_type::eof();
    break;
  }
  ssize_t n;
  do {
    n = ::read(fd_, buffer_, kBufferBytes);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return traits_type::eof();
  setg(buffer_, buffer_, buffer_ + n);
  return traits_type::to_int_type(*gptr());
}

}  // namespace octo
