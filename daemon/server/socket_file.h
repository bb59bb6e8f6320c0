// octod's unix socket file: a private directory for it, and what to do with
// a socket file left at the path by an earlier run.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace octo {

// Makes `socket_path` ready for a new listener:
//  - missing directories are created owner-only (0700); an existing
//    directory must belong to this user (FAILED_PRECONDITION otherwise: a
//    directory someone else controls could swap the socket);
//  - a socket file where nothing answers (a crashed run's) is removed, and
//    *removed_stale says so;
//  - a socket where a daemon answers is FAILED_PRECONDITION ("already
//    running"), and anything at the path that is not a socket too (never
//    removed).
absl::Status PrepareSocketPath(const std::string& socket_path, bool* removed_stale);

}  // namespace octo
