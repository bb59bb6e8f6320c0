#include "daemon/http/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/http/http_connection.h"
#include "daemon/http/http_status.h"
#include "daemon/http/socket_stream.h"

namespace octo {

void HttpRouter::Add(std::string method, std::string path, HttpHandler handler) {
  exact_[{std::move(method), std::move(path)}] = std::move(handler);
}

void HttpRouter::AddPrefix(std::string method, std::string prefix, HttpHandler handler) {
  prefixes_.push_back({{std::move(method), std::move(prefix)}, std::move(handler)});
}

void HttpRouter::Dispatch(const HttpRequest& request, HttpExchange& exchange) const {
  // HEAD is GET without the body (HttpExchange leaves the body out).
  const std::string method = request.method == "HEAD" ? "GET" : request.method;
  bool path_known = false;
  if (const auto it = exact_.find({method, request.path}); it != exact_.end()) {
    it->second(request, exchange);
    return;
  }
  for (const auto& [key, handler] : exact_) path_known |= key.second == request.path;
  for (const auto& [key, handler] : prefixes_) {
    if (!absl::StartsWith(request.path, key.second) || request.path.size() == key.second.size()) continue;
    if (key.first == method) {
      handler(request, exchange);
      return;
    }
    path_known = true;
  }
  if (path_known) {
    exchange.ReplyError(absl::InvalidArgumentError(absl::StrCat(request.method, " is not allowed on ", request.path)),
                        405);
    return;
  }
  exchange.ReplyError(absl::NotFoundError(absl::StrCat("no route ", request.method, " ", request.path)));
}

std::string HttpRouter::RouteOf(const HttpRequest& request) const {
  const std::string method = request.method == "HEAD" ? "GET" : request.method;
  if (exact_.count({method, request.path}) > 0) return request.path;
  for (const auto& [key, handler] : prefixes_) {
    if (key.first == method && absl::StartsWith(request.path, key.second) && request.path.size() > key.second.size()) {
      return absl::StrCat(key.second, "*");
    }
  }
  return "unmatched";
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options, HttpRouter router) {
  const std::string address = absl::StrCat(options.host, ":", options.port);
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port_text = std::to_string(options.port);
  if (const int error = ::getaddrinfo(options.host.c_str(), port_text.c_str(), &hints, &found); error != 0) {
    return absl::UnavailableError(absl::StrCat("http: cannot resolve ", address, ": ", ::gai_strerror(error)));
  }
  int fd = -1;
  std::string last_error = "no address";
  for (const addrinfo* it = found; it != nullptr && fd < 0; it = it->ai_next) {
    fd = ::socket(it->ai_family, it->ai_socktype | SOCK_CLOEXEC, it->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, it->ai_addr, it->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      last_error = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("http: cannot listen on ", address, ": ", last_error));
  sockaddr_storage bound = {};
  socklen_t bound_size = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_size);
  const int port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                     : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  const int stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) {
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("http: eventfd: ", std::strerror(errno)));
  }
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(options), std::move(router), fd, stop_fd, port));
  server->acceptor_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

HttpServer::HttpServer(HttpServerOptions options, HttpRouter router, int listen_fd, int stop_fd, int port)
    : options_(std::move(options)), router_(std::move(router)), listen_fd_(listen_fd), stop_fd_(stop_fd), port_(port) {}

HttpServer::~HttpServer() {
  Stop();
  ::close(listen_fd_);
  ::close(stop_fd_);
}

void HttpServer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  const uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof(one));
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<Connection> connections;
  {
    absl::MutexLock lock(&mu_);
    connections.swap(connections_);
  }
  for (Connection& connection : connections) connection.thread.join();
}

void HttpServer::ReapFinished() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (*it->done) {
      it->thread.join();  // it has finished: its last act was setting done
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

namespace {

// The peer's address without its port ("127.0.0.1", "::1").
std::string PeerAddress(const sockaddr_storage& peer) {
  char text[INET6_ADDRSTRLEN] = "";
  if (peer.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&peer)->sin_addr, text, sizeof(text));
  } else if (peer.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_addr, text, sizeof(text));
  }
  return text;
}

}  // namespace

void HttpServer::RefuseBusy(int fd, absl::string_view why) {
  const std::string body = absl::StrCat("{\"error\":\"", why, "; retry\"}");
  const std::string reply = absl::StrCat(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nRetry-After: ",
      kHttpRetryAfterSeconds, "\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
  (void)!::send(fd, reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::close(fd);
}

void HttpServer::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    sockaddr_storage peer = {};
    socklen_t peer_size = sizeof(peer);
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_size, SOCK_CLOEXEC);
    if (fd < 0) continue;  // the client gave up already, or out of descriptors: try the next
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // a token is a small write: send it now
    const std::string address = PeerAddress(peer);
    absl::MutexLock lock(&mu_);
    ReapFinished();
    if (active_ >= options_.max_connections) {
      RefuseBusy(fd, "octod has too many HTTP connections");
      continue;
    }
    if (per_address_[address] >= options_.max_connections_per_address) {
      RefuseBusy(fd, absl::StrCat("octod has ", options_.max_connections_per_address,
                                  " HTTP connections from this address, the most it takes"));
      continue;
    }
    ++active_;
    ++per_address_[address];
    auto done = std::make_shared<bool>(false);
    connections_.push_back({std::thread([this, fd, done, address] {
                              Serve(fd);
                              absl::MutexLock lock(&mu_);
                              --active_;
                              if (--per_address_[address] == 0) per_address_.erase(address);
                              *done = true;
                            }),
                            done});
  }
}

void HttpServer::Serve(int fd) {
  SocketStream stream(fd, stop_fd_, options_.io_timeout, options_.tls != nullptr ? options_.tls->get() : nullptr);
  ServeHttpConnection(stream, router_, options_.connection);
}

}  // namespace octo
