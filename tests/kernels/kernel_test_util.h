// Random inputs for the float kernel tests (rmsnorm, rope, silu_mul,
// softmax, top_k_experts) and the element-wise comparison they share. The
// quantized encodings have quant_test_util.h.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace octo::testing {

// n floats drawn uniformly from [lo, hi); the same seed gives the same vector.
inline std::vector<float> RandomVector(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// Per element: |got - want| <= abs + rel * |want|.
struct Tolerance {
  double rel;
  double abs;
};

// Checks every element of got against want (rows of `width`) and reports
// the first miss (row, index, values) and the count, not thousands of lines.
// Equal values (infinities too) match; a NaN matches only a NaN.
template <typename Want>
void ExpectClose(const std::vector<float>& got, const std::vector<Want>& want, int width, const Tolerance& tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t misses = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    const double w = static_cast<double>(want[k]);
    const double diff = std::abs(static_cast<double>(got[k]) - w);
    const bool same = std::isnan(w) ? std::isnan(got[k]) : static_cast<double>(got[k]) == w;  // NaNs, infinities
    if (!same && !(diff <= tol.abs + tol.rel * std::abs(w))) {
      if (misses == 0) {
        ADD_FAILURE() << what << ": row " << k / width << " index " << k % width << ": got " << got[k]
                      << ", want " << w << " (diff " << diff << ")";
      }
      ++misses;
    }
  }
  EXPECT_EQ(misses, 0u) << what << ": elements outside the tolerance";
}

// Every element of got has want's bits; reports the first that differs and
// the count.
inline void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t misses = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i])) continue;
    if (misses++ == 0) ADD_FAILURE() << what << ": index " << i << ": got " << got[i] << ", want " << want[i];
  }
  EXPECT_EQ(misses, 0u) << what << ": elements with other bits";
}

// As ExpectSameBits, except that a NaN matches any NaN: an operation that
// makes a NaN (inf + -inf) gives the device's own NaN bits.
inline void ExpectSameBitsAnyNan(const std::vector<float>& got, const std::vector<float>& want,
                                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t misses = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i])) continue;
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    if (misses++ == 0) ADD_FAILURE() << what << ": index " << i << ": got " << got[i] << ", want " << want[i];
  }
  EXPECT_EQ(misses, 0u) << what << ": elements with other bits";
}

}  // namespace octo::testing
