// Who may call octod. A call over the unix socket is trusted: the socket is
// owner-only, so the file system already said who may connect. A call over
// TCP must carry the metadata `authorization: Bearer <token>` with the token
// from octod's token file (compared in constant time); without a configured
// token no TCP call is accepted at all.
//
// The token travels in the clear over plain TCP: expose the port only on a
// trusted network, or behind a TLS-terminating proxy or an SSH tunnel.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/server/bearer_token.h"

namespace grpc {
class CallbackServerContext;
}

namespace octo {

// Tokens shorter than this are refused when reading a token file.
inline constexpr size_t kMinTokenBytes = 16;
inline constexpr size_t kMaxTokenBytes = 4096;


// The token in `path`, surrounding whitespace removed. INVALID_ARGUMENT when
// the file is readable by others (mode o+r), not a regular file, empty, or
// the token has fewer than kMinTokenBytes or more than kMaxTokenBytes bytes
// or contains whitespace or control characters; NOT_FOUND when it cannot be
// read.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

class Authorizer {
 public:
  // token: what TCP callers must present; nullopt refuses every TCP call.
  explicit Authorizer(std::optional<std::string> token) : token_(std::move(token)) {}

  // OK for a unix-socket peer; for any other peer, OK only with the right
  // bearer token, UNAUTHENTICATED otherwise (the message does not say how
  // close a wrong token was).
  absl::Status Check(const grpc::CallbackServerContext& context) const;

  // The same decision from the parts of a call (peer as gRPC writes it,
  // e.g. "unix:..." or "ipv4:127.0.0.1:4242"; the authorization header
  // values sent, possibly none).
  absl::Status Check(absl::string_view peer, const std::optional<absl::string_view>& authorization) const;

 private:
  std::optional<std::string> token_;
};

}  // namespace octo
