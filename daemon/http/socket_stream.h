// A connected TCP socket as Boost.Beast's synchronous stream (it has
// read_some and write_some), with what a plain blocking socket lacks:
//
//   * every read and write waits at most `io_timeout` (a client that sends
//     nothing, or stops reading a stream, loses its connection), and reads
//     stop at the read deadline, when one is set (a whole-request limit: a
//     client sending a byte a second does not hold the connection for long);
//   * a write to the server's stop descriptor (an eventfd) wakes every
//     read at once, so the server can stop without waiting out the
//     timeout; writes go on (a handler finishing its reply) but wait at
//     most kStopWriteGrace each from then on;
//   * PeerGone() tells, without reading, whether the client hung up: how a
//     handler waiting for tokens notices a disconnect.
//
// With a TLS context the stream is TLS (OpenSSL) over the socket: Handshake
// first, then reads and writes are records, with the same timeouts.
//
// Errors: a timeout is boost::asio::error::timed_out, the stop is
// operation_aborted, a closed peer eof (reads) or the errno (writes); a TLS
// failure is connection_aborted.
// Threads: one thread uses a stream at a time; PeerGone may be called
// between its reads and writes.
#pragma once

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

#include <sys/uio.h>

#include <chrono>
#include <cstddef>

#include "boost/asio/buffer.hpp"
#include "boost/asio/error.hpp"
#include "boost/system/system_error.hpp"

namespace octo {

inline constexpr std::chrono::milliseconds kStopWriteGrace{2000};
inline constexpr std::chrono::milliseconds kLingerTime{2000};
inline constexpr size_t kLingerBytes = 64 << 20;

class SocketStream {
 public:
  // Takes ownership of `fd` (closed by the destructor); `stop_fd` is not
  // owned; `tls`, when not null, must outlive the stream.
  SocketStream(int fd, int stop_fd, std::chrono::milliseconds io_timeout, SSL_CTX* tls = nullptr);
  ~SocketStream();
  SocketStream(const SocketStream&) = delete;
  SocketStream& operator=(const SocketStream&) = delete;

  template <typename MutableBuffers>
  size_t read_some(const MutableBuffers& buffers, boost::system::error_code& ec) {
    for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers); ++it) {
      const boost::asio::mutable_buffer buffer(*it);
      if (buffer.size() > 0) return Read(buffer.data(), buffer.size(), ec);
    }
    ec = {};
    return 0;
  }
  template <typename MutableBuffers>
  size_t read_some(const MutableBuffers& buffers) {
    boost::system::error_code ec;
    const size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

  template <typename ConstBuffers>
  size_t write_some(const ConstBuffers& buffers, boost::system::error_code& ec) {
    iovec parts[kMaxIov];
    int count = 0;
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers) && count < kMaxIov; ++it) {
      const boost::asio::const_buffer buffer(*it);
      if (buffer.size() == 0) continue;
      parts[count++] = iovec{const_cast<void*>(buffer.data()), buffer.size()};
    }
    return Write(parts, count, ec);
  }
  template <typename ConstBuffers>
  size_t write_some(const ConstBuffers& buffers) {
    boost::system::error_code ec;
    const size_t n = write_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

  // True when the peer closed its side or the connection broke (or the
  // server is stopping). Data waiting to be read does not count.
  bool PeerGone() const;

  // A TLS stream's handshake, within the read deadline; true at once for a
  // plain one. False when it fails (a plain-text client, an untrusted client
  // certificate): the connection is then only to be closed.
  bool Handshake();

  // Reads after `deadline` fail with timed_out (time_point::max(): none).
  void set_read_deadline(std::chrono::steady_clock::time_point deadline) { read_deadline_ = deadline; }
  // Waits up to `timeout` for a byte to read (or the peer closing): false
  // on timeout or when the server stops.
  bool WaitReadable(std::chrono::milliseconds timeout);

  // After an error reply to a request whose body was not read: stop
  // sending, then read and drop what the client still sends (up to
  // kLingerBytes or kLingerTime) before closing, so that the client reads
  // the reply instead of a connection reset.
  void LingeringClose();

  int fd() const { return fd_; }

 private:
  static constexpr int kMaxIov = 64;

  size_t Read(void* data, size_t size, boost::system::error_code& ec);
  size_t Write(const iovec* parts, int count, boost::system::error_code& ec);
  // Waits until fd_ is ready for `events` (POLLIN / POLLOUT).
  bool Wait(short events, boost::system::error_code& ec);

  // One SSL call's want (SSL_ERROR_WANT_READ/WRITE) waited out; false with
  // `ec` set when the wait failed or the call failed for good.
  bool WaitForTls(int ssl_result, boost::system::error_code& ec);

  int fd_;
  int stop_fd_;
  bool tls_ = false;    // TLS asked for
  SSL* ssl_ = nullptr;  // null for a plain stream, or when TLS could not be set up
  std::chrono::milliseconds io_timeout_;
  std::chrono::steady_clock::time_point read_deadline_ = std::chrono::steady_clock::time_point::max();
};

}  // namespace octo
