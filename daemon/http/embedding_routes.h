// Embeddings on octod's HTTP listener (Runtime::Embed does the work):
//   POST /v1/embeddings   OpenAI: model, input (a string, an array of
//     strings, an array of token ids, or an array of such arrays),
//     encoding_format ("float" or "base64": little-endian float32),
//     dimensions (keep the first N values, then normalise: the Matryoshka
//     cut); -> {object "list", data [{object "embedding", index,
//     embedding}], model, usage}. An input longer than the context is a 400
//     context_length_exceeded.
//   POST /api/embed       Ollama: model, input (a string or an array of
//     strings), truncate (default true: cut to the context; false: 400),
//     dimensions, options.num_ctx, keep_alive; -> {model, embeddings,
//     total_duration, load_duration, prompt_eval_count}.
//   POST /api/embeddings  Ollama's older form: model, prompt, options,
//     keep_alive; -> {embedding}, not normalised (as Ollama's); an empty
//     prompt gives an empty embedding and only loads the model.
// /v1/embeddings and /api/embed return unit-length (L2) vectors. Pooling is
// the model's (storage/model_config.h: Pooling).
#pragma once

#include "daemon/core/runtime.h"
#include "daemon/http/http_server.h"

namespace octo {

// `runtime` must outlive the router.
void AddEmbeddingRoutes(HttpRouter& router, Runtime& runtime);

}  // namespace octo
