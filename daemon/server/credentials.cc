#include "daemon/server/credentials.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

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

std::optional<Caller> Credentials::Match(absl::string_view authorization) const {
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWithIgnoreCase(authorization, kBearer)) return std::nullopt;
  const absl::string_view presented = authorization.substr(kBearer.size());
  std::optional<Caller> caller;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (ConstantTimeEquals(presented, tokens_[i]) && !caller.has_value()) {
      caller = Caller{absl::StrCat("token:", i + 1), false};
    }
  }
  if (admin_token_.has_value() && ConstantTimeEquals(presented, *admin_token_)) caller = Caller{"admin", true};
  return caller;
}

}  // namespace octo
