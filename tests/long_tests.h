// The slow suites' two forms. CI runs the short form of each (a sample of
// what the long form sweeps); tests/run_long_tests.sh sets OCTO_LONG_TESTS=1
// and runs the long forms (every truncation length, 15 loader kills, ...),
// and the fuzz targets for hours.
#pragma once

#include <cstdlib>
#include <cstring>

namespace octo::testing {

inline bool LongTests() {
  const char* value = std::getenv("OCTO_LONG_TESTS");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

}  // namespace octo::testing
