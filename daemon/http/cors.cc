#include "daemon/http/cors.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "storage/bounded_json.h"

namespace octo {
namespace {

// `text` against `pattern`, '*' matching any run of characters: the
// classic two-pointer walk, backtracking only to the last '*'.
bool GlobMatch(absl::string_view pattern, absl::string_view text) {
  size_t p = 0, t = 0, star = absl::string_view::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != absl::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace

std::vector<std::string> DefaultCorsOrigins() {
  std::vector<std::string> origins;
  for (const char* host : {"localhost", "127.0.0.1", "0.0.0.0"}) {
    for (const char* scheme : {"http", "https"}) {
      origins.push_back(absl::StrCat(scheme, "://", host));
      origins.push_back(absl::StrCat(scheme, "://", host, ":*"));
    }
  }
  for (const char* app : {"app", "file", "tauri", "vscode-webview", "vscode-file"}) {
    origins.push_back(absl::StrCat(app, "://*"));
  }
  return origins;
}

bool OriginAllowed(const std::vector<std::string>& patterns, absl::string_view origin) {
  if (origin.empty()) return false;
  for (const std::string& pattern : patterns) {
    if (GlobMatch(pattern, origin)) return true;
  }
  return false;
}

absl::Status CheckCorsOrigins(const std::vector<std::string>& patterns) {
  if (patterns.size() > kMaxCorsOrigins) {
    return absl::InvalidArgumentError(absl::StrCat(patterns.size(), " origins; at most ", kMaxCorsOrigins));
  }
  for (const std::string& pattern : patterns) {
    const bool printable = std::all_of(pattern.begin(), pattern.end(), [](char c) { return c > ' ' && c < 127; });
    if (pattern.empty() || pattern.size() > kMaxCorsOriginBytes || !printable) {
      return absl::InvalidArgumentError(absl::StrCat("origin ", QuotePrefix(pattern), " must be 1..",
                                                     kMaxCorsOriginBytes, " printable ASCII characters, no spaces"));
    }
  }
  return absl::OkStatus();
}

}  // namespace octo
