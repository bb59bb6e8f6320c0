// systemd's service notification protocol (sd_notify(3)) without
// libsystemd: one datagram per message to the unix socket $NOTIFY_SOCKET
// names ("@..." an abstract one). octod sends READY=1 once it serves,
// STOPPING=1 at shutdown, and WATCHDOG=1 while its scheduler makes progress
// (the unit's WatchdogSec restarts a daemon that stops sending it).
// Outside systemd (no NOTIFY_SOCKET) every call does nothing.
#pragma once

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace octo {

class SystemdNotifier {
 public:
  // From NOTIFY_SOCKET, and WATCHDOG_USEC (when WATCHDOG_PID is unset or
  // this process).
  static SystemdNotifier FromEnvironment();

  bool enabled() const { return !socket_.empty(); }
  // The unit's watchdog timeout; nullopt without one.
  std::optional<absl::Duration> watchdog_timeout() const { return watchdog_; }

  // Sends `state`, e.g. "READY=1\nSTATUS=serving". False when the datagram
  // could not be sent (or notification is off).
  bool Send(absl::string_view state) const;

 private:
  std::string socket_;  // the path; a leading '@' is the abstract namespace
  std::optional<absl::Duration> watchdog_;
};

}  // namespace octo
