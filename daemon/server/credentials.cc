#include "daemon/server/bearer_token.h"

#include <algorithm>

#include "absl/strings/match.h"

namespace octo {

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // Every byte of the longer string is visited whatever the contents.
  const size_t n = std::max(a.size(), b.size());
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | (x ^ y);
  }
  return diff == 0;
}

bool BearerTokenMatches(absl::string_view authorization, absl::string_view token) {
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWithIgnoreCase(authorization, kBearer)) return false;
  return ConstantTimeEquals(authorization.substr(kBearer.size()), token);
}

}  // namespace octo
