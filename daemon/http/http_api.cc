#include "daemon/http/http_api.h"

#include <ctime>

#include "daemon/http/embedding_routes.h"
#include "daemon/http/llama_server_routes.h"
#include "daemon/http/ollama_api.h"
#include "daemon/http/ollama_routes.h"
#include "daemon/http/openai_routes.h"

namespace octo {

HttpRouter HttpApiRoutes(Runtime& runtime, const std::string& version,
                         std::shared_ptr<const HttpRequestCounts> request_counts) {
  HttpRouter router;
  AddOpenAiRoutes(router, runtime, std::time(nullptr));
  AddOllamaRoutes(router, runtime, version, OllamaTimestamp());
  AddLlamaServerRoutes(router, runtime);
  AddEmbeddingRoutes(router, runtime);
  if (request_counts != nullptr) AddMetricsRoute(router, runtime, std::move(request_counts));
  return router;
}

absl::StatusOr<std::unique_ptr<HttpServer>> StartHttpApi(Runtime& runtime, const HttpApiOptions& options) {
  auto request_counts = options.metrics ? std::make_shared<HttpRequestCounts>() : nullptr;
  HttpRouter router = HttpApiRoutes(runtime, options.version, request_counts);
  HttpServerOptions server;
  server.host = options.host;
  server.port = options.port;
  server.connection.credentials = options.credentials;
  server.connection.cors_origins = options.cors_origins;
  server.connection.request_counts = request_counts;
  server.tls = options.tls;
  return HttpServer::Start(std::move(server), std::move(router));
}

}  // namespace octo
