#include "daemon/server/auth.h"

#include <sys/stat.h>

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/server_context.h"

namespace octo {

absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path) {
  struct stat info = {};
  if (::stat(path.c_str(), &info) != 0) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  if (!S_ISREG(info.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  if ((info.st_mode & S_IROTH) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is readable by every user; make it private (chmod 600 ", path, ")"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<std::string> tokens;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    const std::string token(absl::StripAsciiWhitespace(line));
    if (token.empty()) continue;
    if (token.size() < kMinTokenBytes || token.size() > kMaxTokenBytes) {
      return absl::InvalidArgumentError(absl::StrCat("the token on line ", line_number, " of ", path, " has ",
                                                     token.size(), " bytes; use ", kMinTokenBytes, "..",
                                                     kMaxTokenBytes, " (e.g. openssl rand -hex 32)"));
    }
    for (char c : token) {
      if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
        return absl::InvalidArgumentError(
            absl::StrCat("the token on line ", line_number, " of ", path, " contains whitespace or control bytes"));
      }
    }
    tokens.push_back(token);
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " holds no token (e.g. openssl rand -hex 32 > ", path, ")"));
  }
  return tokens;
}

absl::StatusOr<Caller> Authorizer::Identify(const grpc::CallbackServerContext& context) const {
  const auto& metadata = context.client_metadata();
  std::optional<absl::string_view> authorization;
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  return Identify(context.peer(), authorization);
}

absl::StatusOr<Caller> Authorizer::Identify(absl::string_view peer,
                                            const std::optional<absl::string_view>& authorization) const {
  if (absl::StartsWith(peer, "unix:")) return Caller{"unix", true};
  if (!credentials_.any()) return absl::UnauthenticatedError("octod accepts no TCP calls without a configured token");
  if (!authorization.has_value() || !absl::StartsWithIgnoreCase(*authorization, "Bearer ")) {
    return absl::UnauthenticatedError("missing 'authorization: Bearer <token>' metadata");
  }
  std::optional<Caller> caller = credentials_.Match(*authorization);
  if (!caller.has_value()) return absl::UnauthenticatedError("wrong token");
  return *std::move(caller);
}

}  // namespace octo
