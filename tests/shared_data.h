// Access to ../shared test data. A user's clone has no ../shared: tests that
// need it call OCTO_REQUIRE_SHARED, which skips the test when it is absent.
#pragma once

#include <filesystem>
#include <string>

#ifndef OCTO_SHARED_DIR
#error "tests/CMakeLists.txt defines OCTO_SHARED_DIR"
#endif

namespace octo::testing {

inline std::string SharedPath(const std::string& relative) { return std::string(OCTO_SHARED_DIR) + "/" + relative; }

inline bool HaveShared(const std::string& relative) { return std::filesystem::exists(SharedPath(relative)); }

}  // namespace octo::testing

#define OCTO_REQUIRE_SHARED(relative)                                              \
  do {                                                                             \
    if (!::octo::testing::HaveShared(relative)) GTEST_SKIP() << "no ../shared/" << (relative); \
  } while (false)
