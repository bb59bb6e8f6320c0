// Which model an HTTP request names, as the OpenAI and Ollama APIs use the
// "model" field: a model directory under octod's models root, by its path
// relative to the root ("llama-3.2-1b", "team/qwen2"), optionally with
// Ollama's default tag (":latest").
//
// octod holds one model at a time. A request for another model of the
// root loads it first, as Ollama does; that is refused (FAILED_PRECONDITION,
// 409) while generations run on the current one, and (PERMISSION_DENIED,
// 403) to a caller that is not admin (credentials.h).
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

// The loaded model when `name` is it; otherwise the model of that name
// under the root, loaded now for an admin `caller`. INVALID_ARGUMENT (param
// "model") for an empty name, NOT_FOUND (model_not_found) for a name that is
// no model there, PERMISSION_DENIED when it would need loading by a caller
// that may not.
absl::StatusOr<SelectedModel> SelectModel(Runtime& runtime, absl::string_view name, const Caller& caller);

// PERMISSION_DENIED naming what `action` was, unless `caller` is admin.
absl::Status RequireAdmin(const Caller& caller, absl::string_view action);

// The model of that name under the root, loaded or not; NOT_FOUND otherwise.
absl::StatusOr<ModelSummary> FindModel(Runtime& runtime, absl::string_view name);

}  // namespace octo
