// Importing a GGUF as a new model (Runtime::CreateModel, Ollama's
// /api/create): the file decomposed into a fresh layer directory under the
// models root, written beside it under a temporary name and renamed into
// place once whole, so a failed or concurrent import leaves nothing at NAME.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/core/model_paths.h"
#include "daemon/core/runtime_impl.h"
#include "storage/decompose.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

namespace fs = std::filesystem;

// The GGUF file `from` names: an absolute path on this machine, or a GGUF
// under the models root.
absl::StatusOr<std::string> GgufToImport(const std::string& root, const std::string& from) {
  if (from.empty()) return absl::InvalidArgumentError("from: the GGUF file to import is required");
  if (from[0] != '/') {
    OCTO_ASSIGN_OR_RETURN(const ResolvedModel source, ResolveModelPath(root, from));
    if (!source.gguf) {
      return absl::InvalidArgumentError(absl::StrCat("from: ", source.name, " is a layer directory already"));
    }
    return source.path;
  }
  std::error_code ec;
  if (!fs::is_regular_file(from, ec)) {
    return absl::NotFoundError(absl::StrCat("from: no file ", from.substr(0, kMaxModelPathBytes), " on the server"));
  }
  return from;
}

}  // namespace

absl::Status RuntimeImpl::CreateModel(const std::string& name, const std::string& from, const CreateWatcher& watch) {
  OCTO_ASSIGN_OR_RETURN(const ResolvedModel target, NewModelPath(options_.models_root, name));
  OCTO_ASSIGN_OR_RETURN(const std::string gguf, GgufToImport(options_.models_root, from));
  static std::atomic<uint64_t> imports{0};
  const fs::path final_path(target.path);
  const fs::path partial = final_path.parent_path() /
                           absl::StrCat(".", final_path.filename().string(), ".importing-", ::getpid(), "-", ++imports);
  Log(absl::StrCat("creating model ", target.name, " from ", gguf));
  const auto began = std::chrono::steady_clock::now();
  DecomposeOptions options;
  options.progress = [&](uint64_t done, uint64_t total) {
    if (!watch) return;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    watch(LoadProgress{
        .model = target.name, .stage = "decomposing", .bytes_done = done, .bytes_total = total, .seconds = seconds});
  };
  absl::Status made = Decompose(gguf, partial.string(), options).status();
  std::error_code ec;
  if (made.ok()) {
    fs::rename(partial, final_path, ec);  // refused when another import took NAME meanwhile
    if (ec) {
      made = absl::AlreadyExistsError(absl::StrCat("model ", target.name, " appeared while importing: ", ec.message()));
    }
  }
  if (!made.ok()) {
    fs::remove_all(partial, ec);
    Log(absl::StrCat("creating model ", target.name, " failed: ", made.message()));
    return made;
  }
  Log(absl::StrFormat("created model %s from %s in %.1f s", target.name, gguf,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count()));
  return absl::OkStatus();
}

}  // namespace octo
