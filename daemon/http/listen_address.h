// Where octod's HTTP API listens: "host:port", "[v6]:port" or
// "localhost:port". Port 0 picks a free port (octod logs the one it got).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace octo {

struct HttpListenAddress {
  std::string host;  // as written, brackets removed
  int port = 0;      // 0..65535
  bool loopback = false;  // every address `host` resolves to is 127.0.0.0/8 or ::1
};

// INVALID_ARGUMENT saying what is wrong: no colon, an empty host, an
// unbracketed IPv6 host, a port outside 0..65535, a host that does not
// resolve.
absl::StatusOr<HttpListenAddress> ParseHttpListen(absl::string_view address);

}  // namespace octo
