// One HTTP connection's requests, read and answered in turn: Beast's parser
// within the header and body limits, the token check, the route, a reply.
// HttpServer runs one per accepted socket on the connection's thread; the
// HTTP fuzz target (tests/fuzz) runs it on one end of a socketpair, so the
// fuzzed path is the one octod serves.
#pragma once

#include <optional>
#include <string>

#include "daemon/http/exchange.h"
#include "daemon/http/socket_stream.h"

namespace octo {

class HttpRouter;

inline constexpr size_t kMaxHttpBodyBytes = 8 << 20;  // above the 1 MiB prompt limit, JSON-escaped
inline constexpr size_t kMaxHttpHeaderBytes = 16 << 10;

struct HttpConnectionOptions {
  std::optional<std::string> token;  // required of every request when set
};

// Serves requests from `stream` until the client closes, goes quiet past
// the stream's timeout, sends something that is not HTTP (answered 400, 413
// or 431, then closed), asks to close, or the server stops. A handler that
// throws costs its request a 500 and the connection, never the process.
void ServeHttpConnection(SocketStream& stream, const HttpRouter& router, const HttpConnectionOptions& options);

}  // namespace octo
