#include "tests/daemon/http/http_test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http.hpp"

namespace octo::testing {

namespace http = boost::beast::http;
using boost::asio::ip::tcp;

nlohmann::json HttpReply::Json() const { return nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false); }

std::vector<std::string> HttpReply::Events() const {
  std::vector<std::string> events;
  for (absl::string_view event : absl::StrSplit(body, "\n\n", absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&event, "data: ")) events.emplace_back(event);
  }
  return events;
}

std::vector<nlohmann::json> HttpReply::Lines() const {
  std::vector<nlohmann::json> lines;
  for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
    lines.push_back(nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false));
  }
  return lines;
}

HttpReply Request(int port, const std::string& method, const std::string& path, const std::string& body,
                  const std::map<std::string, std::string>& headers) {
  HttpReply reply;
  boost::asio::io_context io;
  tcp::socket socket(io);
  boost::system::error_code ec;
  socket.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)), ec);
  if (ec) return reply;
  http::request<http::string_body> request(http::string_to_verb(method), path, 11);
  request.set(http::field::host, "127.0.0.1");
  if (!body.empty()) request.set(http::field::content_type, "application/json");
  for (const auto& [name, value] : headers) request.set(name, value);
  request.body() = body;
  request.prepare_payload();
  http::write(socket, request, ec);
  if (ec) return reply;
  boost::beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  if (method == "HEAD") parser.skip(true);
  http::read(socket, buffer, parser, ec);
  if (ec) return reply;
  reply.status = static_cast<int>(parser.get().result_int());
  reply.content_type = std::string(parser.get()[http::field::content_type]);
  reply.retry_after = std::string(parser.get()[http::field::retry_after]);
  for (const auto& field : parser.get()) {
    reply.headers[absl::AsciiStrToLower(std::string(field.name_string()))] = std::string(field.value());
  }
  reply.body = parser.get().body();
  return reply;
}

RawConnection::RawConnection(int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) Close();
}

RawConnection::~RawConnection() { Close(); }

void RawConnection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool RawConnection::Send(const std::string& bytes) {
  return fd_ >= 0 && ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

bool RawConnection::ReadUntil(const std::string& text) {
  while (fd_ >= 0 && received_.find(text) == std::string::npos) {
    pollfd fds = {fd_, POLLIN, 0};
    if (::poll(&fds, 1, 5000) <= 0) return false;
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return received_.find(text) != std::string::npos;
    received_.append(chunk, static_cast<size_t>(n));
  }
  return fd_ >= 0;
}

std::string RawConnection::ReadToEnd() {
  while (fd_ >= 0) {
    pollfd fds = {fd_, POLLIN, 0};
    if (::poll(&fds, 1, 5000) <= 0) break;
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) break;
    received_.append(chunk, static_cast<size_t>(n));
  }
  return received_;
}

std::string RawPost(const std::string& path, const std::string& body, bool keep_alive) {
  return absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n",
                      keep_alive ? "" : "Connection: close\r\n", "Content-Length: ", body.size(), "\r\n\r\n", body);
}

}  // namespace octo::testing
