// llama-server's utility routes, for the clients and scripts written for it:
//   GET  /health      no token needed: 200 {"status": "ok", "model": NAME or
//                     null} while octod serves, 503 {"status": "shutting
//                     down"} after; a load balancer's or systemd's probe
//   POST /tokenize    {"content", "add_special" (false), "parse_special"
//                     (true), "with_pieces" (false)} -> {"tokens": [ids]},
//                     or [{"id", "piece"}] with with_pieces
//   POST /detokenize  {"tokens": [ids]} -> {"content": text}
// Both token routes use the loaded model's tokenizer (409 without one).
#pragma once

#include "daemon/core/runtime.h"
#include "daemon/http/http_server.h"

namespace octo {

// The routes above (/health is open: http_connection.h's IsOpenRoute).
void AddLlamaServerRoutes(HttpRouter& router, Runtime& runtime);

}  // namespace octo
