// The bearer token check that gRPC over TCP and the HTTP API share, apart
// from the rest of auth.h so that the HTTP library (and its fuzz target)
// needs no gRPC.
#pragma once

#include "absl/strings/string_view.h"

namespace octo {

// Equality of a and b in time that depends only on their lengths.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// True when `authorization` (an Authorization header's or metadata value)
// is "Bearer <token>" with this token; the scheme's case does not matter
// (RFC 7235), the token is compared in constant time.
bool BearerTokenMatches(absl::string_view authorization, absl::string_view token);

}  // namespace octo
