// Ollama's POST /api/pull, for a model under octod's models root: it makes
// the named model the loaded one (a GGUF is decomposed into the cache on
// first use) and streams the load's progress as Ollama streams a download:
//   {"status":"decomposing into the cache","total":T,"completed":C}  (a GGUF, first use)
//   {"status":"loading"}
//   {"status":"success"}
// one NDJSON line per step, or one {"status":"success"} with "stream":
// false. A failure is the usual error reply before the stream starts, and
// an {"error": "..."} line after. Loading needs the admin token over TCP,
// as a request naming another model does (model_select.h).
#pragma once

#include "daemon/core/runtime.h"
#include "daemon/http/exchange.h"

namespace octo {

void ServePull(Runtime& runtime, const HttpRequest& request, HttpExchange& exchange);

}  // namespace octo
