// octod's HTTP API: the OpenAI routes (openai_routes.h) and the Ollama
// routes (ollama_routes.h) on one listener (http_server.h), over the same
// Runtime as the gRPC service, so HTTP and gRPC requests share the
// scheduler and are batched together.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/core/runtime.h"
#include "daemon/http/cors.h"
#include "daemon/http/http_server.h"
#include "daemon/http/metrics.h"
#include "daemon/server/credentials.h"

namespace octo {

struct HttpApiOptions {
  std::string host;
  int port = 0;
  Credentials credentials;  // any token: every request needs one
  std::shared_ptr<TlsContext> tls;  // not null: HTTPS
  std::string version;               // octod's, for /api/version
  std::vector<std::string> cors_origins = DefaultCorsOrigins();  // cors.h
  bool metrics = true;                                           // GET /metrics (metrics.h)
};

// Every route of the API over `runtime` (which must outlive the router);
// GET /metrics too when `request_counts` is set.
HttpRouter HttpApiRoutes(Runtime& runtime, const std::string& version,
                         std::shared_ptr<const HttpRequestCounts> request_counts = nullptr);

// Starts listening; `runtime` must outlive the server.
absl::StatusOr<std::unique_ptr<HttpServer>> StartHttpApi(Runtime& runtime, const HttpApiOptions& options);

}  // namespace octo
