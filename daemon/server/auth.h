// Who may call octod, and who each call is (credentials.h). A call over the
// unix socket is trusted: the socket is owner-only, so the file system
// already said who may connect (gRPC does not report a unix peer's uid;
// only the socket's owner, or root, can connect). A call over TCP must
// carry the metadata `authorization: Bearer <token>` with one of the token
// file's tokens or the admin token (compared in constant time); without a
// configured token no TCP call is accepted at all.
//
// The token travels in the clear over plain TCP: expose the port only on a
// trusted network, or behind a TLS-terminating proxy or an SSH tunnel.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/server/credentials.h"

namespace grpc {
class CallbackServerContext;
}

namespace octo {

// Tokens shorter than this are refused when reading a token file.
inline constexpr size_t kMinTokenBytes = 16;
inline constexpr size_t kMaxTokenBytes = 4096;


// The tokens in `path`: one per line, surrounding whitespace removed, empty
// lines skipped (several users, each with a token of their own, are several
// credentials). INVALID_ARGUMENT when the file is readable by others (mode
// o+r), not a regular file, holds no token, or a token has fewer than
// kMinTokenBytes or more than kMaxTokenBytes bytes or contains whitespace or
// control characters (naming its line); NOT_FOUND when it cannot be read.
absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path);

class Authorizer {
 public:
  explicit Authorizer(Credentials credentials) : credentials_(std::move(credentials)) {}

  // The caller: "unix" (admin) for a unix-socket peer; for any other peer
  // the credential its bearer token names, UNAUTHENTICATED without one (the
  // message does not say how close a wrong token was).
  absl::StatusOr<Caller> Identify(const grpc::CallbackServerContext& context) const;

  // The same decision from the parts of a call (peer as gRPC writes it,
  // e.g. "unix:..." or "ipv4:127.0.0.1:4242"; the authorization header
  // values sent, possibly none).
  absl::StatusOr<Caller> Identify(absl::string_view peer, const std::optional<absl::string_view>& authorization) const;

 private:
  Credentials credentials_;
};

}  // namespace octo
