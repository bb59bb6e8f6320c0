// Model directories under octod's models root: clients name them by a path
// relative to the root, and may never reach outside it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/runtime.h"

namespace octo {

// A model path longer than this is refused before it touches the file system.
inline constexpr size_t kMaxModelPathBytes = 4096;

// The absolute directory for `path` under `root`. INVALID_ARGUMENT for an
// empty or absolute path, a ".." component, or one that resolves (through
// symlinks) outside the root; NOT_FOUND when there is no model directory
// (no manifest.json) there.
absl::StatusOr<std::string> ResolveModelPath(const std::string& root, const std::string& path);

// Model directories (holding manifest.json) at most two levels under
// `root`, sorted by path. A directory whose manifest does not parse is
// listed with its name and architecture "unreadable: <reason>".
absl::StatusOr<std::vector<ModelSummary>> ScanModels(const std::string& root);

}  // namespace octo
