// Generated models made once per test run rather than once per test: when
// OCTO_TEST_MODEL_CACHE names a directory (CTest sets it for every test, and
// a fixture empties it at the start of each run: tests/CMakeLists.txt), a
// model is generated into it the first time it is asked for, under a key
// that covers everything that makes its bytes, and copied from it after
// that. Each test gets a copy of its own, so a test that damages its model
// (a flipped byte, a truncated file) damages nothing another test reads.
// Without the variable (a test binary run by hand) every call generates.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"

namespace octo::testing {

// `dest` (a file or a directory) as `make` makes it: from the cache under
// `key` when there, else made into the cache first (under a temporary name,
// then renamed: concurrent test processes may race, the first rename wins).
absl::Status CachedOrMade(const std::string& key, const std::string& dest,
                         const std::function<absl::Status(const std::string& path)>& make);

}  // namespace octo::testing
