#include "daemon/core/session_id.h"

#include <algorithm>

#include "absl/strings/ascii.h"

namespace octo {

bool IsGeneratedSessionId(absl::string_view id) {
  return id.size() == 33 && id[0] == 's' && std::all_of(id.begin() + 1, id.end(), [](char c) {
           return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
         });
}

}  // namespace octo
