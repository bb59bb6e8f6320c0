#include "daemon/http/model_select.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/model_name.h"
#include "daemon/http/http_status.h"
#include "storage/bounded_json.h"
#include "storage/status_macros.h"

namespace octo {

std::string ModelPathOf(absl::string_view name) { return CanonicalModelName(name); }

absl::StatusOr<ModelSummary> FindModel(Runtime& runtime, absl::string_view name) {
  const std::string path = ModelPathOf(name);
  if (path.empty()) return WithParam(absl::InvalidArgumentError("model: required"), "model");
  OCTO_ASSIGN_OR_RETURN(std::vector<ModelSummary> models, runtime.ListModels());
  for (ModelSummary& model : models) {
    if (model.path == path) return model;
  }
  return ModelNotFound(name);
}

absl::Status RequireAdmin(const Caller& caller, absl::string_view action) {
  if (caller.admin) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(action, " needs octod's admin token (--admin-token-file)"));
}

absl::StatusOr<SelectedModel> SelectModel(Runtime& runtime, absl::string_view name) {
  const std::string path = ModelPathOf(name);
  if (path.empty()) return WithParam(absl::InvalidArgumentError("model: required"), "model");
  const auto start = std::chrono::steady_clock::now();
  bool loaded_now = false;
  absl::StatusOr<ModelSummary> model = runtime.AcquireModel(path, &loaded_now);
  if (absl::IsNotFound(model.status()) || absl::IsInvalidArgument(model.status())) {
    // No model of that name (model_not_found), or one that did not load.
    OCTO_RETURN_IF_ERROR(FindModel(runtime, name).status());
  }
  if (!model.ok()) return WithParam(Annotate(model.status(), absl::StrCat("loading model ", QuotePrefix(path))), "model");
  SelectedModel selected;
  selected.summary = *std::move(model);
  if (loaded_now) {
    selected.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return selected;
}

}  // namespace octo
