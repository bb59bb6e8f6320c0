// libFuzzer target for octod's HTTP request path: the input is everything a
// client sends on one connection (any number of requests, or none that
// parse), served by ServeHttpConnection, the function octod runs for each
// connection: Beast's parser within the header and body limits, the token
// check, the router and every route's field parser, over FuzzRuntime.
//
// The bytes go into one end of a socketpair and the connection is served on
// the other; a client thread writes them and reads every reply at once (so
// neither side can fill the socket and stall the other), then closes. Invariants:
// the connection ends (no hang: libFuzzer's -timeout catches one), nothing
// throws out of it, no stack overflow or memory error (ASan), and every
// reply starts as an HTTP/1.x status line.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/http/http_api.h"
#include "daemon/http/http_connection.h"
#include "daemon/http/socket_stream.h"
#include "tests/fuzz/fuzz_runtime.h"

namespace {

void Check(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "http_request_fuzz: invariant broken: %s\n", what);
  std::abort();
}

// Writes `bytes` to `fd` while reading whatever comes back, until the
// server closes its end; returns what came back.
std::string Converse(int fd, const uint8_t* bytes, size_t size) {
  std::string received;
  size_t sent = 0;
  bool write_open = true;
  for (;;) {
    if (write_open && sent == size) {
      ::shutdown(fd, SHUT_WR);  // the client has said everything
      write_open = false;
    }
    pollfd p = {fd, static_cast<short>(POLLIN | (write_open ? POLLOUT : 0)), 0};
    if (::poll(&p, 1, 10000) <= 0) return received;  // the server hangs: -timeout reports it
    if (p.revents & POLLIN) {
      char buffer[16384];
      const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) return received;
      received.append(buffer, static_cast<size_t>(n));
    } else if (p.revents & (POLLHUP | POLLERR)) {
      return received;
    }
    if (write_open && (p.revents & POLLOUT)) {
      const ssize_t n = ::send(fd, bytes + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN) write_open = false;  // the server closed early
      if (n > 0) sent += static_cast<size_t>(n);
    }
  }
}

// The client side, on one thread for the whole run: a thread per input
// would cost more than serving the input.
class Client {
 public:
  Client() : thread_([this] { Loop(); }) {}

  // Starts conversing on `fd`; Wait() returns what came back.
  void Start(int fd, const uint8_t* data, size_t size) {
    absl::MutexLock lock(&mu_);
    job_ = Job{fd, data, size};
  }
  std::string Wait() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(+[](std::optional<std::string>* r) { return r->has_value(); }, &received_));
    std::string received = *std::move(received_);
    received_.reset();
    return received;
  }

 private:
  struct Job {
    int fd;
    const uint8_t* data;
    size_t size;
  };
  void Loop() {
    for (;;) {
      Job job;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(+[](std::optional<Job>* j) { return j->has_value(); }, &job_));
        job = *job_;
        job_.reset();
      }
      std::string received = Converse(job.fd, job.data, job.size);
      absl::MutexLock lock(&mu_);
      received_ = std::move(received);
    }
  }

  absl::Mutex mu_;
  std::optional<Job> job_ ABSL_GUARDED_BY(mu_);
  std::optional<std::string> received_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // runs for the life of the process
};

struct Api {
  octo::fuzzing::FuzzRuntime runtime;
  octo::HttpRouter router = octo::HttpApiRoutes(runtime, "fuzz");
  int stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);  // never written: the server never stops
  Client client;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Api* api = new Api();
  int fds[2];
  Check(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0, "socketpair");
  api->client.Start(fds[1], data, size);
  {
    octo::SocketStream stream(fds[0], api->stop_fd, std::chrono::seconds(5));  // owns fds[0]
    octo::ServeHttpConnection(stream, api->router, octo::HttpConnectionOptions{});
  }
  const std::string received = api->client.Wait();
  ::close(fds[1]);
  Check(received.empty() || received.rfind("HTTP/1.", 0) == 0, "a reply starts with a status line");
  return 0;
}
