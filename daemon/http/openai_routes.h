// OpenAI's API on octod's HTTP listener:
//   POST /v1/chat/completions   (stream: server-sent events ending "data: [DONE]")
//   POST /v1/completions
//   GET  /v1/models, GET /v1/models/{id}
// Request fields: openai_api.h. Errors: OpenAI's body, {"error": {message,
// type, param, code}}, with the status http_status.h gives. An error after
// a stream began (the job failed) is sent as a last event {"error": ...}
// before [DONE].
#pragma once

#include <cstdint>

#include "daemon/core/runtime.h"
#include "daemon/http/http_server.h"

namespace octo {

// `runtime` must outlive the router. `created` is what /v1/models reports
// as every model's creation time (octod's start, in Unix seconds).
void AddOpenAiRoutes(HttpRouter& router, Runtime& runtime, int64_t created);

}  // namespace octo
