// The models root's files, as Ollama's model management sees them:
// importing a GGUF as a new model (Runtime::CreateModel, /api/create),
// copying a model (/api/copy) and deleting one (/api/delete). New models are
// written beside their place under a temporary name and renamed into it once
// whole, so a failed or concurrent one leaves nothing at NAME.
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
#include "storage/gguf_cache.h"
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

// Where a new model at `final_path` is written before it is renamed there:
// beside it, hidden, unique to this process and call ("importing", "copying").
fs::path PartialPath(const fs::path& final_path, absl::string_view doing) {
  static std::atomic<uint64_t> calls{0};
  return final_path.parent_path() /
         absl::StrCat(".", final_path.filename().string(), ".", doing, "-", ::getpid(), "-", ++calls);
}

}  // namespace

absl::Status RuntimeImpl::CreateModel(const std::string& name, const std::string& from, const CreateWatcher& watch) {
  OCTO_ASSIGN_OR_RETURN(const ResolvedModel target, NewModelPath(options_.models_root, name));
  OCTO_ASSIGN_OR_RETURN(const std::string gguf, GgufToImport(options_.models_root, from));
  const fs::path final_path(target.path);
  const fs::path partial = PartialPath(final_path, "importing");
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

absl::Status RuntimeImpl::CopyModel(const std::string& source, const std::string& destination) {
  OCTO_ASSIGN_OR_RETURN(const ResolvedModel from, ResolveModelPath(options_.models_root, source));
  OCTO_ASSIGN_OR_RETURN(const ResolvedModel to, NewModelPath(options_.models_root, destination, from.gguf));
  const fs::path final_path(to.path);
  const fs::path partial = PartialPath(final_path, "copying");
  std::error_code ec;
  fs::create_directories(final_path.parent_path(), ec);
  if (!ec) fs::copy(from.path, partial, fs::copy_options::recursive, ec);
  if (!ec) fs::rename(partial, final_path, ec);
  if (ec) {
    fs::remove_all(partial, ec);
    return absl::InternalError(absl::StrCat("copying ", from.name, " to ", to.name, ": ", ec.message()));
  }
  Log(absl::StrCat("copied model ", from.name, " to ", to.name));
  return absl::OkStatus();
}

absl::Status RuntimeImpl::DeleteModel(const std::string& name) {
  OCTO_ASSIGN_OR_RETURN(const ResolvedModel model, ResolveModelPath(options_.models_root, name));
  std::lock_guard<std::mutex> load(load_mu_);  // no load of it meanwhile
  ModelSlot unloaded;  // freed outside mu_
  {
    // A loaded model goes too when idle; one in use stays, and its files.
    std::unique_lock<std::mutex> lock(mu_);
    if (models_.contains(model.name)) {
      if (WaitUntilIdle(model.name, lock)) {
        unloaded = TakeModel(model.name);
        Log(absl::StrCat("unloading ", model.name, " to delete it"));
      } else if (auto it = models_.find(model.name); it != models_.end()) {
        return absl::FailedPreconditionError(absl::StrCat(model.name, " is in use (", JobsOn(*it->second.model),
                                                          " jobs; sessions hold it too): delete it when it is idle"));
      }
    }
  }
  std::error_code ec;
  // A symlinked model goes as its link: what it points at is not the root's.
  const fs::path path = fs::path(options_.models_root) / model.name;
  if (model.gguf) {
    if (absl::StatusOr<GgufFingerprint> print = FingerprintGguf(model.path); print.ok()) {
      fs::remove_all(GgufCacheEntry(CacheDir(), model.path, *print), ec);
    }
  }
  fs::remove_all(path, ec);
  if (ec) return absl::InternalError(absl::StrCat("deleting ", model.name, ": ", ec.message()));
  Log(absl::StrCat("deleted model ", model.name));
  return absl::OkStatus();
}

}  // namespace octo
