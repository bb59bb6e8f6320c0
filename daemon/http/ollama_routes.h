// Ollama's API on octod's HTTP listener:
//   POST /api/generate, POST /api/chat   (stream: NDJSON, one object a line,
//                                        the last with "done": true)
//   GET /api/tags, POST /api/show, GET /api/ps, GET /api/version, GET /
// Request fields: ollama_api.h. Errors: {"error": "message"} with the status
// http_status.h gives; an error after a stream began is its last line.
//
// /api/generate renders the prompt (and system) with the model's chat
// template unless raw is set or the model has none, as Ollama's templates
// do; without a template the system text is not used. Its last object
// carries "context": the prompt's and the reply's token ids, which a next
// request may send back to continue.
#pragma once

#include <string>

#include "daemon/core/runtime.h"
#include "daemon/http/http_server.h"

namespace octo {

// `runtime` must outlive the router. `version` is octod's; `started_at` its
// start time as OllamaTimestamp writes it (what the model lists call
// modified_at).
void AddOllamaRoutes(HttpRouter& router, Runtime& runtime, std::string version, std::string started_at);

}  // namespace octo
