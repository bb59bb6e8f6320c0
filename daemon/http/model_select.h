// Which model an HTTP request names, as the OpenAI and Ollama APIs use the
// "model" field: a model directory under octod's models root, by its path
// relative to the root ("llama-3.2-1b", "team/qwen2"), optionally with
// Ollama's default tag (":latest").
//
// octod holds several models at once (--max-loaded-models). A request for a
// model of the root that is not loaded loads it first, as Ollama does,
// beside the others; idle models make room, least recently used first, and
// when only models in use hold the room the request is UNAVAILABLE (503,
// with Retry-After).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/core/runtime.h"
#include "daemon/server/credentials.h"

namespace octo {

// The name in its canonical form (daemon/core/model_name.h): no ":latest"
// tag, no "./".
std::string ModelPathOf(absl::string_view name);

struct SelectedModel {
  ModelSummary summary;
  double load_seconds = 0;  // > 0 when this request loaded it
};

// The loaded model `name`, or the model of that name under the root,
// loaded now. INVALID_ARGUMENT (param "model") for an empty name, NOT_FOUND
// (model_not_found) for a name that is no model there, UNAVAILABLE when
// there is no room for it now.
absl::StatusOr<SelectedModel> SelectModel(Runtime& runtime, absl::string_view name);

// PERMISSION_DENIED naming what `action` was, unless `caller` is admin.
absl::Status RequireAdmin(const Caller& caller, absl::string_view action);

// The model of that name under the root, loaded or not; NOT_FOUND otherwise.
absl::StatusOr<ModelSummary> FindModel(Runtime& runtime, absl::string_view name);

}  // namespace octo
