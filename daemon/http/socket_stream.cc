#include "daemon/http/socket_stream.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace octo {

SocketStream::SocketStream(int fd, int stop_fd, std::chrono::milliseconds io_timeout, SSL_CTX* tls)
    : fd_(fd), stop_fd_(stop_fd), io_timeout_(io_timeout) {
  if (tls == nullptr) return;
  tls_ = true;
  // OpenSSL reads and writes the socket itself: non-blocking, so every wait
  // is ours (Wait), with its timeouts and the stop descriptor.
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
  ssl_ = SSL_new(tls);
  if (ssl_ != nullptr) {
    SSL_set_fd(ssl_, fd_);
    SSL_set_accept_state(ssl_);
  }
}

SocketStream::~SocketStream() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  ::close(fd_);
}

bool SocketStream::WaitForTls(int ssl_result, boost::system::error_code& ec) {
  switch (SSL_get_error(ssl_, ssl_result)) {
    case SSL_ERROR_WANT_READ: return Wait(POLLIN, ec);
    case SSL_ERROR_WANT_WRITE: return Wait(POLLOUT, ec);
    case SSL_ERROR_ZERO_RETURN: ec = boost::asio::error::eof; return false;
    case SSL_ERROR_SYSCALL:
      if (errno == EINTR) return true;
      ec = ERR_peek_error() == 0 && errno == 0 ? boost::system::error_code(boost::asio::error::eof)
                                                : boost::system::error_code(boost::asio::error::connection_aborted);
      ERR_clear_error();
      return false;
    default:
      ERR_clear_error();
      ec = boost::asio::error::connection_aborted;
      return false;
  }
}

bool SocketStream::Handshake() {
  if (!tls_) return true;
  if (ssl_ == nullptr) return false;
  boost::system::error_code ec;
  for (;;) {
    errno = 0;
    const int result = SSL_do_handshake(ssl_);
    if (result == 1) return true;
    if (!WaitForTls(result, ec)) return false;
  }
}

bool SocketStream::Wait(short events, boost::system::error_code& ec) {
  pollfd fds[2] = {{fd_, events, 0}, {stop_fd_, POLLIN, 0}};
  std::chrono::milliseconds timeout = io_timeout_;
  if (events == POLLIN && read_deadline_ != std::chrono::steady_clock::time_point::max()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(read_deadline_ - std::chrono::steady_clock::now());
    timeout = std::max(std::chrono::milliseconds(0), std::min(timeout, left));
  }
  int timeout_ms = static_cast<int>(timeout.count());
  int count = 2;
  for (;;) {
    const int ready = ::poll(fds, count, timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      ec.assign(errno, boost::system::system_category());
      return false;
    }
    if (ready == 0) {
      ec = boost::asio::error::timed_out;
      return false;
    }
    if (count == 2 && fds[1].revents != 0) {
      if (events == POLLIN) {
        ec = boost::asio::error::operation_aborted;
        return false;
      }
      // Stopping: a reply being written may finish, in a short while.
      count = 1;
      timeout_ms = static_cast<int>(std::min(io_timeout_, kStopWriteGrace).count());
      continue;
    }
    return true;  // ready, or an error the next call reports
  }
}

size_t SocketStream::Read(void* data, size_t size, boost::system::error_code& ec) {
  while (ssl_ != nullptr) {
    errno = 0;
    const int n = SSL_read(ssl_, data, static_cast<int>(std::min<size_t>(size, 1 << 30)));
    if (n > 0) {
      ec = {};
      return static_cast<size_t>(n);
    }
    if (!WaitForTls(n, ec)) return 0;
  }
  for (;;) {
    if (!Wait(POLLIN, ec)) return 0;
    const ssize_t n = ::recv(fd_, data, size, MSG_DONTWAIT);
    if (n > 0) {
      ec = {};
      return static_cast<size_t>(n);
    }
    if (n == 0) {
      ec = boost::asio::error::eof;
      return 0;
    }
    if (errno == EAGAIN || errno == EINTR) continue;
    ec.assign(errno, boost::system::system_category());
    return 0;
  }
}

size_t SocketStream::Write(const iovec* parts, int count, boost::system::error_code& ec) {
  if (count == 0) {
    ec = {};
    return 0;
  }
  while (ssl_ != nullptr) {
    // One part per call (a write_some may write less than it is given); the
    // same part again after a want, as OpenSSL asks.
    errno = 0;
    const int n = SSL_write(ssl_, parts[0].iov_base, static_cast<int>(std::min<size_t>(parts[0].iov_len, 1 << 30)));
    if (n > 0) {
      ec = {};
      return static_cast<size_t>(n);
    }
    if (!WaitForTls(n, ec)) return 0;
  }
  msghdr message = {};
  message.msg_iov = const_cast<iovec*>(parts);
  message.msg_iovlen = static_cast<size_t>(count);
  for (;;) {
    if (!Wait(POLLOUT, ec)) return 0;
    // MSG_NOSIGNAL: a closed peer is EPIPE here, not SIGPIPE for the process.
    const ssize_t n = ::sendmsg(fd_, &message, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      ec = {};
      return static_cast<size_t>(n);
    }
    if (errno == EAGAIN || errno == EINTR) continue;
    ec.assign(errno, boost::system::system_category());
    return 0;
  }
}

void SocketStream::LingeringClose() {
  if (ssl_ != nullptr) SSL_shutdown(ssl_);  // close_notify, if the socket takes it now; the rest is dropped raw
  ::shutdown(fd_, SHUT_WR);
  const auto deadline = std::chrono::steady_clock::now() + kLingerTime;
  size_t dropped = 0;
  char sink[64 << 10];
  while (dropped < kLingerBytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    pollfd fds = {fd_, POLLIN, 0};
    if (::poll(&fds, 1, static_cast<int>(left.count())) <= 0) return;
    const ssize_t n = ::recv(fd_, sink, sizeof(sink), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return;
    if (n > 0) dropped += static_cast<size_t>(n);
  }
}

bool SocketStream::WaitReadable(std::chrono::milliseconds timeout) {
  if (ssl_ != nullptr && SSL_pending(ssl_) > 0) return true;
  pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  int ready;
  do {
    ready = ::poll(fds, 2, static_cast<int>(timeout.count()));
  } while (ready < 0 && errno == EINTR);
  return ready > 0 && fds[1].revents == 0;
}

bool SocketStream::PeerGone() const {
  pollfd fds[2] = {{fd_, POLLRDHUP, 0}, {stop_fd_, POLLIN, 0}};
  if (::poll(fds, 2, 0) <= 0) return false;
  return fds[1].revents != 0 || (fds[0].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace octo
