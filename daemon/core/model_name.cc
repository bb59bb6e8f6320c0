#include "daemon/core/model_name.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace octo {

std::string CanonicalModelName(absl::string_view name) {
  if (absl::EndsWith(name, ":latest")) name.remove_suffix(7);
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (!part.empty() && part != ".") parts.push_back(part);
  }
  return absl::StrJoin(parts, "/");
}

}  // namespace octo
