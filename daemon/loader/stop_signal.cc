#include "daemon/loader/stop_signal.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

namespace octo {

std::shared_ptr<StopSignal> StopSignal::Create() {
  return std::shared_ptr<StopSignal>(new StopSignal(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)));
}

StopSignal::~StopSignal() {
  if (fd_ >= 0) ::close(fd_);
}

void StopSignal::Raise() {
  raised_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  if (fd_ >= 0) (void)!::write(fd_, &one, sizeof(one));  // stays readable: nobody reads it
}

}  // namespace octo
