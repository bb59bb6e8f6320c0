// octod's HTTP listener: a thread accepts connections and each connection
// gets a thread of its own, which reads requests (Boost.Beast's parser)
// and runs the route's handler synchronously. A handler that streams
// tokens waits on its connection's thread, so connections never block one
// another; the runtime batches their jobs into shared passes.
//
// Limits, each answered with a status the client can read:
//   more than max_connections at once, or more than
//     max_connections_per_address from one address      503 with Retry-After, closed
//   a body over kMaxHttpBodyBytes                       413
//   headers over kMaxHttpHeaderBytes                    431
//   the headers, the body or the next request not in
//     time (http_connection.h's deadlines)              connection closed
//   a write (a reply, a streamed token) waiting
//     io_timeout for the client to read                 connection closed
// The deadlines are whole-request limits, and the per-address cap keeps
// one client's many slow connections from holding every slot: slow clients
// cannot starve the others.
//
// Auth: with a token, every request must carry `Authorization: Bearer
// <token>` (compared in constant time) or gets 401 from its headers alone,
// before its body is read. Without one, every request is served: octod
// refuses to start without a token unless the address is loopback (config.h).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/http/exchange.h"
#include "daemon/http/http_connection.h"
#include "daemon/http/tls_context.h"

namespace octo {

inline constexpr size_t kMaxHttpConnections = 1024;
inline constexpr size_t kMaxHttpConnectionsPerAddress = 64;
inline constexpr int kHttpRetryAfterSeconds = 1;  // what a 503 for a full server says

using HttpHandler = std::function<void(const HttpRequest&, HttpExchange&)>;

// Method + path -> handler. Exact paths, and prefixes ("/v1/models/")
// for paths that carry a name. An unknown path is 404, a known path with
// another method 405 (error bodies shaped by http_status.h).
class HttpRouter {
 public:
  void Add(std::string method, std::string path, HttpHandler handler);
  void AddPrefix(std::string method, std::string prefix, HttpHandler handler);
  void Dispatch(const HttpRequest& request, HttpExchange& exchange) const;
  // The route `request` goes to, as /metrics names it: its path, a prefix
  // route's prefix and "*" ("/v1/models/*"), or "unmatched".
  std::string RouteOf(const HttpRequest& request) const;

 private:
  std::map<std::pair<std::string, std::string>, HttpHandler> exact_;
  std::vector<std::pair<std::pair<std::string, std::string>, HttpHandler>> prefixes_;
};

struct HttpServerOptions {
  std::string host;  // as in listen_address.h
  int port = 0;      // 0: any free port (port() tells which)
  size_t max_connections = kMaxHttpConnections;
  size_t max_connections_per_address = kMaxHttpConnectionsPerAddress;
  std::chrono::milliseconds io_timeout{std::chrono::seconds(60)};
  HttpConnectionOptions connection;  // credentials and deadlines
  std::shared_ptr<TlsContext> tls;   // not null: every connection is TLS
};

class HttpServer {
 public:
  // Binds and listens; UNAVAILABLE naming the address when it cannot.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options, HttpRouter router);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }

  // Stops accepting, wakes every connection (reads and writes fail, and
  // handlers see ClientGone()), and waits for every connection thread.
  void Stop();

 private:
  HttpServer(HttpServerOptions options, HttpRouter router, int listen_fd, int stop_fd, int port);
  void AcceptLoop();
  void Serve(int fd);
  // 503 with Retry-After on `fd`, then closes it.
  static void RefuseBusy(int fd, absl::string_view why);
  void ReapFinished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const HttpServerOptions options_;
  const HttpRouter router_;
  const int listen_fd_;
  const int stop_fd_;  // eventfd; readable once stopping
  const int port_;
  std::thread acceptor_;

  struct Connection {
    std::thread thread;
    std::shared_ptr<bool> done;  // set under mu_ as the thread ends
  };
  absl::Mutex mu_;
  std::vector<Connection> connections_ ABSL_GUARDED_BY(mu_);
  size_t active_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, size_t> per_address_ ABSL_GUARDED_BY(mu_);  // open connections by peer address
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace octo
