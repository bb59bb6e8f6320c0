#include "daemon/http/http_api.h"

#include <ctime>

#include "daemon/http/ollama_api.h"
#include "daemon/http/ollama_routes.h"
#include "daemon/http/openai_routes.h"

namespace octo {

absl::StatusOr<std::unique_ptr<HttpServer>> StartHttpApi(Runtime& runtime, const HttpApiOptions& options) {
  HttpRouter router;
  AddOpenAiRoutes(router, runtime, std::time(nullptr));
  AddOllamaRoutes(router, runtime, options.version, OllamaTimestamp());
  HttpServerOptions server;
  server.host = options.host;
  server.port = options.port;
  server.token = options.token;
  return HttpServer::Start(std::move(server), std::move(router));
}

}  // namespace octo
