// Ollama's model management, on octod's models root: import (create),
// copy, delete; and pull, which octod cannot do.
//
// POST /api/create {"model": NAME, "from": GGUF} imports a GGUF as the model
// NAME (Runtime::CreateModel: decomposed into models_root/NAME). GGUF is a
// path on the server, absolute or under the models root; Ollama's older
// form, "modelfile": "FROM GGUF", is read too (a Modelfile line other than
// FROM is refused, naming it). The decomposition streams as Ollama streams
// its progress, one NDJSON line per step:
//   {"status":"decomposing","total":T,"completed":C}   (the first and last byte, and every 250 ms between)
//   {"status":"success"}
// or one {"status":"success"} with "stream": false. A failure is the usual
// error reply before the stream starts, an {"error": "..."} line after.
// Fields that would change the model (quantize, files, adapters, template,
// system, parameters, messages) are refused naming the field. Creating a
// model needs the admin token over TCP, as loading one does.
//
// POST /api/copy {"source", "destination"} copies a model (a layer directory
// or GGUF) to a new name; DELETE /api/delete {"model"} removes one (not the
// loaded one: 409), a GGUF's decomposed copy in the cache too. Both answer
// 200 with an empty body, as Ollama does, and need the admin token.
//
// POST /api/pull is 501: octod pulls from no registry, and the message says
// what to do instead.
#pragma once

#include "daemon/core/runtime.h"
#include "daemon/http/exchange.h"

namespace octo {

void ServeCreate(Runtime& runtime, const HttpRequest& request, HttpExchange& exchange);
void ServeCopy(Runtime& runtime, const HttpRequest& request, HttpExchange& exchange);
void ServeDelete(Runtime& runtime, const HttpRequest& request, HttpExchange& exchange);
void ServePull(const HttpRequest& request, HttpExchange& exchange);

}  // namespace octo
