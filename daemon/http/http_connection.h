// One HTTP connection's requests, read and answered in turn: Beast's parser
// within the header and body limits and deadlines, the token check (from
// the headers, before any of the body is read), the route, a reply.
// HttpServer runs one per accepted socket on the connection's thread; the
// HTTP fuzz target (tests/fuzz) runs it on one end of a socketpair, so the
// fuzzed path is the one octod serves.
#pragma once

#include "absl/strings/string_view.h"

#include <chrono>
#include <memory>
#include <vector>
#include <optional>
#include <string>

#include "daemon/http/cors.h"
#include "daemon/http/exchange.h"
#include "daemon/server/credentials.h"
#include "daemon/http/socket_stream.h"

namespace octo {

class HttpRouter;
class HttpRequestCounts;  // metrics.h

inline constexpr size_t kMaxHttpBodyBytes = 8 << 20;  // above the 1 MiB prompt limit, JSON-escaped
inline constexpr size_t kMaxHttpHeaderBytes = 16 << 10;
// Whole-phase time limits, not per byte: a client sending a byte a second
// loses its connection at the deadline all the same.
inline constexpr std::chrono::seconds kHttpHeaderTimeout{10};  // a new connection's request line and headers
inline constexpr std::chrono::seconds kHttpBodyTimeout{60};    // the body, from the end of its headers
inline constexpr std::chrono::seconds kHttpIdleTimeout{30};    // a kept-alive connection's wait for its next request

struct HttpConnectionOptions {
  // Any token: every request needs one, and is its caller's; none (octod
  // listens on loopback only then): every request is "anonymous", admin.
  Credentials credentials;
  // The origins whose browser pages may call the API (cors.h).
  std::vector<std::string> cors_origins = DefaultCorsOrigins();
  // Not null: every request answered is counted there (/metrics).
  std::shared_ptr<HttpRequestCounts> request_counts;
  std::chrono::milliseconds header_timeout = kHttpHeaderTimeout;
  std::chrono::milliseconds body_timeout = kHttpBodyTimeout;
  std::chrono::milliseconds idle_timeout = kHttpIdleTimeout;
};

// Serves requests from `stream` until the client closes, misses a deadline
// (a new connection: its headers within header_timeout; then each body
// within body_timeout of its headers, each next request's first byte within
// idle_timeout and its headers within header_timeout of that), sends
// something that is not HTTP (answered 400, 413 or 431, then closed), fails
// the token check (401 from the headers alone; the body is never read),
// asks to close, or the server stops. A handler that throws costs its
// request a 500 and the connection, never the process.
void ServeHttpConnection(SocketStream& stream, const HttpRouter& router, const HttpConnectionOptions& options);

// The one request answered without a token: GET (or HEAD) /health, a
// probe's (daemon/http/llama_server_routes.h). It tells only whether octod
// serves and which model.
bool IsOpenRoute(absl::string_view method, absl::string_view path);

}  // namespace octo
