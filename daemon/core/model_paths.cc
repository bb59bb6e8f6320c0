#include "daemon/core/model_paths.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "daemon/core/loaded_model.h"
#include "storage/bounded_json.h"
#include "storage/closest_names.h"
#include "storage/decompose.h"
#include "storage/gguf.h"
#include "storage/format.h"
#include "storage/manifest.h"
#include "storage/status_macros.h"

namespace octo {
namespace fs = std::filesystem;
namespace {

bool IsGgufName(const fs::path& path) { return absl::EndsWithIgnoreCase(path.filename().string(), ".gguf"); }

// A model the walk found: its name under the root (a symlink by its own
// name, not its target's) and what it is.
struct FoundModel {
  std::string name;
  fs::path path;
  bool gguf = false;
};

// Layer directories and GGUF files at most two levels under `real_root`,
// sorted by name; nothing is read but the directory entries.
std::vector<FoundModel> FindModels(const fs::path& real_root) {
  std::error_code ec;
  std::vector<FoundModel> found;
  auto visit = [&](const fs::path& path) {
    const std::string name = path.lexically_relative(real_root).string();
    if (fs::is_regular_file(path / kManifestName, ec)) {
      found.push_back({name, path, false});
      return true;
    }
    if (IsGgufName(path) && fs::is_regular_file(path, ec)) {
      found.push_back({name, path, true});
      return true;
    }
    return false;
  };
  auto hidden = [](const fs::path& p) { return p.filename().string().starts_with("."); };
  for (const fs::directory_entry& e : fs::directory_iterator(real_root, ec)) {
    if (hidden(e.path()) || visit(e.path()) || !e.is_directory(ec)) continue;
    for (const fs::directory_entry& inner : fs::directory_iterator(e.path(), ec)) {
      if (!hidden(inner.path())) visit(inner.path());
    }
  }
  std::sort(found.begin(), found.end(), [](const FoundModel& a, const FoundModel& b) { return a.name < b.name; });
  return found;
}

// A layer directory's summary from its manifest; a GGUF's from its header,
// as its layer directory's manifest would give it (nothing is written).
absl::StatusOr<ModelSummary> Summarize(const FoundModel& m) {
  if (!m.gguf) {
    OCTO_ASSIGN_OR_RETURN(const Manifest manifest, ReadManifest(m.path.string()));
    return SummarizeManifest(manifest, m.name);
  }
  OCTO_ASSIGN_OR_RETURN(const GgufFile gguf, GgufFile::Open(m.path.string()));
  OCTO_ASSIGN_OR_RETURN(const Manifest manifest, PlanLayerDirectory(gguf, m.path.filename().string()));
  return SummarizeManifest(manifest, m.name);
}

ModelSummary Unreadable(const std::string& name, const absl::Status& status) {
  ModelSummary s;
  s.path = name;
  s.name = name;
  s.architecture = absl::StrCat("unreadable: ", status.message());
  return s;
}

}  // namespace

namespace {

// `name`'s canonical form when it is a path a client may give: relative,
// without "..", not the root itself.
absl::StatusOr<std::string> ClientModelName(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("model path is empty");
  if (name.size() > kMaxModelPathBytes) {
    return absl::InvalidArgumentError(absl::StrCat("model path is longer than ", kMaxModelPathBytes, " bytes"));
  }
  const std::string quoted = QuotePrefix(name);
  if (name[0] == '/') {
    return absl::InvalidArgumentError(absl::StrCat("model path ", quoted, " must be relative to the models root"));
  }
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part == "..") return absl::InvalidArgumentError(absl::StrCat("model path ", quoted, " contains '..'"));
  }
  std::string canonical = CanonicalModelName(name);
  if (canonical.empty()) return absl::InvalidArgumentError(absl::StrCat("model path ", quoted, " names the root"));
  return canonical;
}

}  // namespace

absl::StatusOr<ResolvedModel> NewModelPath(const std::string& root, const std::string& name, bool gguf) {
  ResolvedModel model;
  OCTO_ASSIGN_OR_RETURN(model.name, ClientModelName(name));
  model.gguf = gguf;
  if (IsGgufName(model.name) != gguf) {
    return absl::InvalidArgumentError(absl::StrCat("model name ", QuotePrefix(name),
                                                   gguf ? " must end in .gguf: it names a GGUF file"
                                                        : " ends in .gguf: it names a layer directory"));
  }
  std::error_code ec;
  const fs::path real_root = fs::canonical(root, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("models root ", root, ": ", ec.message()));
  const fs::path path = real_root / model.name;
  if (fs::symlink_status(path, ec).type() != fs::file_type::not_found) {
    return absl::AlreadyExistsError(
        absl::StrCat("model ", QuotePrefix(model.name), " exists under ", real_root.string(), ": choose another name"));
  }
  model.path = path.string();
  return model;
}

absl::StatusOr<ResolvedModel> ResolveModelPath(const std::string& root, const std::string& name) {
  ResolvedModel model;
  OCTO_ASSIGN_OR_RETURN(model.name, ClientModelName(name));
  const std::string quoted = QuotePrefix(name);
  std::error_code ec;
  const fs::path real_root = fs::canonical(root, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("models root ", root, ": ", ec.message()));
  // Symlinks are followed: only the root's owner can have put them there.
  const fs::path real = fs::canonical(real_root / model.name, ec);
  const bool exists = !ec;
  if (exists && fs::is_regular_file(real / kManifestName, ec)) {
    model.path = real.string();
    return model;
  }
  if (exists && IsGgufName(model.name) && fs::is_regular_file(real, ec)) {
    model.path = real.string();
    model.gguf = true;
    return model;
  }
  const std::string how = "make a layer directory with `octo-ctl decompose FILE.gguf DIR`, or put a .gguf file there";
  if (exists && fs::is_directory(real, ec)) {
    return absl::NotFoundError(absl::StrCat(quoted, " is not a model directory (no manifest.json): ", how));
  }
  std::vector<std::string> names;
  for (const FoundModel& m : FindModels(real_root)) names.push_back(m.name);
  return absl::NotFoundError(absl::StrCat("no model ", quoted, " under ", real_root.string(),
                                          DidYouMean(ClosestNames(model.name, names)),
                                          names.empty() ? absl::StrCat(" (", how, ")") : ""));
}

absl::StatusOr<std::vector<ModelSummary>> ScanModels(const std::string& root) {
  std::error_code ec;
  const fs::path real_root = fs::canonical(root, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("models root ", root, ": ", ec.message()));
  std::vector<ModelSummary> models;
  for (const FoundModel& m : FindModels(real_root)) {
    absl::StatusOr<ModelSummary> summary = Summarize(m);
    models.push_back(summary.ok() ? *std::move(summary) : Unreadable(m.name, summary.status()));
  }
  return models;
}

}  // namespace octo
