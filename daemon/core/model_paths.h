// Models under octod's models root: clients name them by a path relative to
// the root -- a layer directory (manifest.json) or a GGUF file, which is
// decomposed into the cache on first load (storage/gguf_cache.h). A client's
// name never reaches outside the root (no absolute path, no ".."); symlinks
// the root's owner put there are followed wherever they lead.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/core/model_name.h"
#include "daemon/core/runtime.h"

namespace octo {

// A model path longer than this is refused before it touches the file system.
inline constexpr size_t kMaxModelPathBytes = 4096;

struct ResolvedModel {
  std::string name;   // canonical
  std::string path;   // absolute: the layer directory, or the GGUF file
  bool gguf = false;  // `path` is a GGUF file
};

// What `name` names under `root`. INVALID_ARGUMENT for an empty or absolute
// path or a ".." component; NOT_FOUND when there is no layer directory or
// GGUF file there, with the closest names the root has and how to make a
// layer directory.
absl::StatusOr<ResolvedModel> ResolveModelPath(const std::string& root, const std::string& name);

// Where a new model `name` (Runtime::CreateModel, CopyModel) goes under
// `root`: its canonical name and absolute path. INVALID_ARGUMENT as
// ResolveModelPath's for a bad name, and for a name that ends in .gguf for a
// layer directory or does not for a GGUF file (`gguf`); ALREADY_EXISTS when
// anything is at that path.
absl::StatusOr<ResolvedModel> NewModelPath(const std::string& root, const std::string& name, bool gguf = false);

// Layer directories (holding manifest.json) and GGUF files at most two
// levels under `root`, by their path under the root (a symlink by its own
// name), sorted. A directory whose manifest does not parse, or a GGUF that
// does not, is listed with architecture "unreadable: <reason>".
absl::StatusOr<std::vector<ModelSummary>> ScanModels(const std::string& root);

}  // namespace octo
