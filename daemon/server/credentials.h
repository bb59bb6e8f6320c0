// Who may call octod over TCP (gRPC) and HTTP, and who a caller is: the
// bearer tokens octod accepts, each its own credential, and the admin
// token. Apart from auth.h so that the HTTP library (and its fuzz target)
// needs no gRPC.
//
// A caller's credential decides what it may see and do (sessions belong to
// the credential that created them; load, unload and residency need admin):
//   "unix"       a call on the unix socket (owner-only: the daemon's user); admin
//   "token:N"    the Nth token of the token file (one token per line)
//   "admin"      the admin token (--admin-token-file); admin
//   "anonymous"  an HTTP call when octod has no token at all (then it
//                listens on loopback only); admin, as the local user
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace octo {

// Equality of a and b in time that depends only on their lengths.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

struct Caller {
  std::string credential;
  bool admin = false;  // may load, unload, change residency and see every session
};

class Credentials {
 public:
  Credentials() = default;  // no token: HTTP callers are anonymous, TCP gRPC is refused
  Credentials(std::vector<std::string> tokens, std::optional<std::string> admin_token)
      : tokens_(std::move(tokens)), admin_token_(std::move(admin_token)) {}

  // Whether any token is configured (then every TCP or HTTP call needs one).
  bool any() const { return !tokens_.empty() || admin_token_.has_value(); }

  // The caller presenting `authorization` (an Authorization header's or
  // metadata value, "Bearer <token>"; the scheme's case does not matter, RFC
  // 7235), or nullopt when it names no token. Every token is compared, each
  // in constant time, whichever matches.
  std::optional<Caller> Match(absl::string_view authorization) const;

 private:
  std::vector<std::string> tokens_;
  std::optional<std::string> admin_token_;
};

}  // namespace octo
