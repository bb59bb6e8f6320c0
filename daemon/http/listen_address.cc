#include "daemon/http/listen_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace octo {
namespace {

bool IsLoopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    return IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
  }
  return false;
}

}  // namespace

absl::StatusOr<HttpListenAddress> ParseHttpListen(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "' is not host:port"));
  }
  absl::string_view host = address.substr(0, colon);
  if (host.empty()) return absl::InvalidArgumentError(absl::StrCat("'", address, "' has no host (0.0.0.0 for all)"));
  if (host.front() == '[' && host.back() == ']' && host.size() > 2) {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "': write an IPv6 host in brackets, [::1]:port"));
  }
  HttpListenAddress result;
  result.host = std::string(host);
  if (!absl::SimpleAtoi(address.substr(colon + 1), &result.port) || result.port < 0 || result.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "': the port must be 0..65535"));
  }
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int error = ::getaddrinfo(result.host.c_str(), nullptr, &hints, &found); error != 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "': ", result.host, ": ", ::gai_strerror(error)));
  }
  result.loopback = true;
  for (const addrinfo* it = found; it != nullptr; it = it->ai_next) result.loopback &= IsLoopback(it->ai_addr);
  ::freeaddrinfo(found);
  return result;
}

}  // namespace octo
