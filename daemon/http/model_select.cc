#include "daemon/http/model_select.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/model_name.h"
#include "daemon/http/http_status.h"
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

absl::StatusOr<SelectedModel> SelectModel(Runtime& runtime, absl::string_view name, const Caller& caller) {
  const std::string path = ModelPathOf(name);
  if (path.empty()) return WithParam(absl::InvalidArgumentError("model: required"), "model");
  SelectedModel selected;
  if (const RuntimeReport report = runtime.Report(); report.model.has_value() && report.model->path == path) {
    selected.summary = *report.model;
    return selected;
  }
  OCTO_RETURN_IF_ERROR(FindModel(runtime, name).status());
  OCTO_RETURN_IF_ERROR(WithParam(
      RequireAdmin(caller, absl::StrCat("model '", path, "' is not the one loaded, and loading it")), "model"));
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<ModelSummary> loaded = runtime.LoadModel(path, std::nullopt);
  if (!loaded.ok()) return WithParam(Annotate(loaded.status(), absl::StrCat("loading model '", path, "'")), "model");
  selected.summary = *std::move(loaded);
  selected.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return selected;
}

}  // namespace octo
