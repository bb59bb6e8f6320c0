#include "daemon/http/socket_stream.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace octo {

SocketStream::SocketStream(int fd, int stop_fd, std::chrono::milliseconds io_timeout)
    : fd_(fd), stop_fd_(stop_fd), io_timeout_(io_timeout) {}

SocketStream::~SocketStream() { ::close(fd_); }

bool SocketStream::Wait(short events, boost::system::error_code& ec) {
  pollfd fds[2] = {{fd_, events, 0}, {stop_fd_, POLLIN, 0}};
  int timeout_ms = static_cast<int>(io_timeout_.count());
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

bool SocketStream::PeerGone() const {
  pollfd fds[2] = {{fd_, POLLRDHUP, 0}, {stop_fd_, POLLIN, 0}};
  if (::poll(fds, 2, 0) <= 0) return false;
  return fds[1].revents != 0 || (fds[0].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace octo
