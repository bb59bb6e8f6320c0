#include "daemon/server/socket_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "daemon/server/endpoint.h"

namespace octo {
namespace {

namespace fs = std::filesystem;

absl::Status ErrnoError(absl::string_view what, const fs::path& path) {
  return absl::FailedPreconditionError(absl::StrCat(what, " ", path.string(), ": ", std::strerror(errno)));
}

// Creates `dir` and its missing parents, each 0700.
absl::Status MakePrivateDirectory(const fs::path& dir) {
  struct stat info = {};
  if (::stat(dir.c_str(), &info) == 0) {
    if (!S_ISDIR(info.st_mode)) return absl::FailedPreconditionError(absl::StrCat(dir.string(), " is not a directory"));
    return absl::OkStatus();
  }
  if (dir.has_parent_path() && dir.parent_path() != dir) {
    if (absl::Status parent = MakePrivateDirectory(dir.parent_path()); !parent.ok()) return parent;
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoError("cannot create", dir);
  return absl::OkStatus();
}

}  // namespace

absl::Status PrepareSocketPath(const std::string& socket_path, bool* removed_stale) {
  *removed_stale = false;
  const fs::path path(socket_path);
  const fs::path dir = path.parent_path();
  if (absl::Status made = MakePrivateDirectory(dir); !made.ok()) return made;
  struct stat info = {};
  if (::stat(dir.c_str(), &info) != 0) return ErrnoError("cannot stat", dir);
  if (info.st_uid != ::geteuid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the socket directory ", dir.string(), " belongs to another user (uid ", info.st_uid, ")"));
  }
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoError("cannot stat", path);
  }
  if (!S_ISSOCK(info.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(socket_path, " exists and is not a socket; not removing it"));
  }
  if (UnixSocketAnswers(socket_path)) {
    return absl::FailedPreconditionError(absl::StrCat("octod is already running at ", socket_path));
  }
  if (::unlink(path.c_str()) != 0) return ErrnoError("cannot remove the stale socket", path);
  *removed_stale = true;
  return absl::OkStatus();
}

}  // namespace octo
