// Where octod listens, as both octod and its clients work it out. No gRPC.
//
// The unix socket is the default transport. Its default path:
//   root (a system daemon)        /run/octo/octod.sock
//   a user with XDG_RUNTIME_DIR   $XDG_RUNTIME_DIR/octo/octod.sock
//   a user without it             /tmp/octo-$UID/octod.sock
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace octo {

// The path octod listens on when no --socket is given (see above).
std::string DefaultSocketPath();

// Where a client looks when no --socket is given: the user's default first,
// then the system daemon's (/run/octo/octod.sock); the first that exists,
// else the user's default.
std::string DefaultClientSocketPath();

// The gRPC target for a socket path: "unix:" + the absolute path.
std::string UnixTarget(absl::string_view path);

// True when something accepts a connection on the unix socket at `path`
// (a running daemon); false for a missing path, a stale socket file or
// anything that is not a socket.
bool UnixSocketAnswers(const std::string& path);

// OK when `path` fits in a sockaddr_un (107 bytes); INVALID_ARGUMENT naming
// the limit otherwise.
absl::Status CheckUnixSocketPathLength(absl::string_view path);

// "host:port" or "[v6addr]:port" with port 1..65535: OK, else
// INVALID_ARGUMENT saying what is wrong.
absl::Status CheckListenAddress(absl::string_view address);

}  // namespace octo
