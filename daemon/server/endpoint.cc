#include "daemon/server/endpoint.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace octo {
namespace {

constexpr char kSystemSocketPath[] = "/run/octo/octod.sock";

}  // namespace

std::string DefaultSocketPath() {
  if (::geteuid() == 0) return kSystemSocketPath;
  const char* runtime_dir = std::getenv("XDG_RUNTIME_DIR");
  if (runtime_dir != nullptr && runtime_dir[0] == '/') return absl::StrCat(runtime_dir, "/octo/octod.sock");
  return absl::StrCat("/tmp/octo-", ::getuid(), "/octod.sock");
}

std::string DefaultClientSocketPath() {
  const std::string user = DefaultSocketPath();
  std::error_code ec;
  if (std::filesystem::exists(user, ec)) return user;
  if (std::filesystem::exists(kSystemSocketPath, ec)) return kSystemSocketPath;
  return user;
}

std::string UnixTarget(absl::string_view path) {
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(std::string(path), ec);
  return absl::StrCat("unix:", ec ? std::string(path) : absolute.string());
}

bool UnixSocketAnswers(const std::string& path) {
  sockaddr_un address = {};
  if (path.empty() || path.size() >= sizeof(address.sun_path)) return false;
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool answered = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return answered;
}

absl::Status CheckUnixSocketPathLength(absl::string_view path) {
  constexpr size_t kMaxPath = sizeof(sockaddr_un::sun_path) - 1;
  if (path.empty()) return absl::InvalidArgumentError("the socket path is empty");
  if (path.size() > kMaxPath) {
    return absl::InvalidArgumentError(
        absl::StrCat("the socket path is ", path.size(), " bytes; a unix socket path holds at most ", kMaxPath));
  }
  return absl::OkStatus();
}

absl::Status CheckListenAddress(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "' is not host:port"));
  }
  const absl::string_view host = address.substr(0, colon);
  const absl::string_view port_text = address.substr(colon + 1);
  if (host.empty()) return absl::InvalidArgumentError(absl::StrCat("'", address, "' has no host (use 0.0.0.0 for all)"));
  const bool bracketed = host.front() == '[' && host.back() == ']';
  if (!bracketed && host.find(':') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "': write an IPv6 host in brackets, [::1]:port"));
  }
  int port = 0;
  if (!absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "': the port must be 1..65535"));
  }
  return absl::OkStatus();
}

}  // namespace octo
