// Random inputs for the float kernel tests (rmsnorm, rope, silu_mul,
// softmax, top_k_experts). The quantized encodings have quant_test_util.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace octo::testing {

// n floats drawn uniformly from [lo, hi); the same seed gives the same vector.
inline std::vector<float> RandomVector(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

}  // namespace octo::testing
