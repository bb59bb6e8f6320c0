#include "daemon/server/systemd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"

namespace octo {

SystemdNotifier SystemdNotifier::FromEnvironment() {
  SystemdNotifier notifier;
  const char* socket = std::getenv("NOTIFY_SOCKET");
  if (socket != nullptr && (socket[0] == '/' || socket[0] == '@') &&
      std::strlen(socket) < sizeof(sockaddr_un::sun_path)) {
    notifier.socket_ = socket;
  }
  const char* usec = std::getenv("WATCHDOG_USEC");
  const char* pid = std::getenv("WATCHDOG_PID");
  uint64_t micros = 0, watchdog_pid = 0;
  const bool for_us = pid == nullptr || (absl::SimpleAtoi(pid, &watchdog_pid) && watchdog_pid == uint64_t(::getpid()));
  if (usec != nullptr && absl::SimpleAtoi(usec, &micros) && micros > 0 && for_us) {
    notifier.watchdog_ = absl::Microseconds(static_cast<int64_t>(micros));
  }
  return notifier;
}

bool SystemdNotifier::Send(absl::string_view state) const {
  if (socket_.empty()) return false;
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, socket_.data(), socket_.size());
  if (address.sun_path[0] == '@') address.sun_path[0] = '\0';  // abstract namespace
  const socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_.size());
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const ssize_t sent = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&address),
                                length);
  ::close(fd);
  return sent == static_cast<ssize_t>(state.size());
}

}  // namespace octo
