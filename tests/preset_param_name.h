// gtest's name for a test instance whose parameter is a preset name
// ("tiny-qwen3moe" -> "tiny_qwen3moe": gtest takes letters, digits and '_'):
//   INSTANTIATE_TEST_SUITE_P(Presets, Suite, ::testing::Values("tiny", ...), PresetParamName());
#pragma once

#include <string>

namespace octo::testing {

struct PresetParamName {
  template <typename Info>
  std::string operator()(const Info& info) const {
    std::string name = info.param;
    for (char& c : name) {
      if (c == '-' || c == '.') c = '_';
    }
    return name;
  }
};

}  // namespace octo::testing
