// Which web pages may call octod's HTTP API from a browser (CORS), with
// Ollama's OLLAMA_ORIGINS semantics: a default list of local origins
// (localhost, 127.0.0.1 and 0.0.0.0 on any port, over http and https, and
// the app://, file://, tauri://, vscode-webview:// and vscode-file:// pages
// of desktop apps), to which `octod --http-cors-origins` adds.
//
// A pattern is an origin as a browser sends it ("https://chat.example.com")
// in which '*' stands for any run of characters ("http://localhost:*",
// "chrome-extension://*"); "*" alone admits every origin.
//
// A request from an admitted origin gets Access-Control-Allow-Origin (and
// Vary: Origin) on its reply; a preflight (OPTIONS with an Origin) is
// answered 204 with the methods and headers it asked for, without a token,
// as browsers send none there; one from another origin gets 403 and
// nothing else. CORS only lets a page read replies: the token is still
// checked on every request that is not a preflight or GET /health.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace octo {

inline constexpr size_t kMaxCorsOrigins = 64;
inline constexpr size_t kMaxCorsOriginBytes = 256;

std::vector<std::string> DefaultCorsOrigins();

// Whether `origin` matches one of `patterns` ("" never does).
bool OriginAllowed(const std::vector<std::string>& patterns, absl::string_view origin);

// INVALID_ARGUMENT naming the pattern: empty, over kMaxCorsOriginBytes,
// not printable ASCII, or more than kMaxCorsOrigins of them.
absl::Status CheckCorsOrigins(const std::vector<std::string>& patterns);

}  // namespace octo
