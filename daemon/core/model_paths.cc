#include "daemon/core/model_paths.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/core/loaded_model.h"
#include "storage/bounded_json.h"
#include "storage/manifest.h"

namespace octo {
namespace fs = std::filesystem;

absl::StatusOr<std::string> ResolveModelPath(const std::string& root, const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("model path is empty");
  if (path.size() > kMaxModelPathBytes) {
    return absl::InvalidArgumentError(absl::StrCat("model path is longer than ", kMaxModelPathBytes, " bytes"));
  }
  const std::string quoted = QuotePrefix(path);
  if (path[0] == '/') {
    return absl::InvalidArgumentError(absl::StrCat("model path ", quoted, " must be relative to the models root"));
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == "..") return absl::InvalidArgumentError(absl::StrCat("model path ", quoted, " contains '..'"));
  }
  std::error_code ec;
  const fs::path real_root = fs::canonical(root, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("models root ", root, ": ", ec.message()));
  const fs::path real = fs::canonical(real_root / path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("no model ", quoted, " under ", real_root.string()));
  const std::string prefix = real_root.string() + "/";
  if (real.string().compare(0, prefix.size(), prefix) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("model path ", quoted, " leads outside the models root"));
  }
  if (!fs::is_regular_file(real / "manifest.json", ec)) {
    return absl::NotFoundError(absl::StrCat(quoted, " is not a model directory (no manifest.json)"));
  }
  return real.string();
}

absl::StatusOr<std::vector<ModelSummary>> ScanModels(const std::string& root) {
  std::error_code ec;
  const fs::path real_root = fs::canonical(root, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("models root ", root, ": ", ec.message()));
  std::vector<ModelSummary> models;
  auto visit = [&](const fs::path& dir) {
    if (!fs::is_regular_file(dir / "manifest.json", ec)) return false;
    const std::string rel = fs::relative(dir, real_root, ec).string();
    absl::StatusOr<Manifest> manifest = ReadManifest(dir.string());
    if (manifest.ok()) {
      models.push_back(SummarizeManifest(*manifest, rel));
    } else {
      ModelSummary s;
      s.path = rel;
      s.name = rel;
      s.architecture = absl::StrCat("unreadable: ", manifest.status().message());
      models.push_back(s);
    }
    return true;
  };
  for (const fs::directory_entry& e : fs::directory_iterator(real_root, ec)) {
    if (!e.is_directory(ec) || e.path().filename().string().starts_with(".")) continue;
    if (visit(e.path())) continue;
    for (const fs::directory_entry& inner : fs::directory_iterator(e.path(), ec)) {
      if (inner.is_directory(ec) && !inner.path().filename().string().starts_with(".")) visit(inner.path());
    }
  }
  std::sort(models.begin(), models.end(), [](const ModelSummary& a, const ModelSummary& b) { return a.path < b.path; });
  return models;
}

}  // namespace octo
