// SiluMul: the CPU version against a double-precision reference, edge values
// and aliasing.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "kernels/ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

using testing::RandomVector;

// Per element: |got - want| <= kRelTol * |want| + kAbsTol. The float path
// rounds four times (expf about 1 ulp, 1 + e, the division, the product),
// each 2^-24 = 6e-8: under 3e-7 in all; measured 2.0e-7 at worst over 2^20
// random pairs. 1e-6 leaves room. kAbsTol covers silu of very negative gates,
// where expf(-g) overflows to inf and the float result is -0 while the true
// value is about g * e^g (below 1e-30 for the gates used here).
constexpr double kRelTol = 1e-6;
constexpr double kAbsTol = 1e-30;

double ReferenceSiluMul(float gate, float up) {
  const double g = gate;
  return g / (1.0 + std::exp(-g)) * up;
}

void ExpectMatchesReference(const std::vector<float>& gate, const std::vector<float>& up,
                            const std::vector<float>& out, const std::string& what) {
  size_t misses = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double want = ReferenceSiluMul(gate[i], up[i]);
    if (!(std::abs(out[i] - want) <= kRelTol * std::abs(want) + kAbsTol)) {
      if (misses++ == 0) {
        ADD_FAILURE() << what << ": index " << i << " gate " << gate[i] << " up " << up[i]
                      << ": got " << out[i] << ", want " << want;
      }
    }
  }
  EXPECT_EQ(misses, 0u) << what;
}

TEST(SiluMulCpuTest, MatchesDoublePrecisionReference) {
  // 1, odd, a model's hidden_dim (14336) plus an odd tail.
  const int64_t sizes[] = {1, 7, 1000, 14336 + 3};
  uint32_t seed = 1;
  for (int64_t n : sizes) {
    const std::vector<float> gate = RandomVector(n, -20, 20, seed++);
    const std::vector<float> up = RandomVector(n, -3, 3, seed++);
    std::vector<float> out(n);
    ASSERT_TRUE(cpu::SiluMul(gate.data(), up.data(), out.data(), n).ok());
    ExpectMatchesReference(gate, up, out, "n=" + std::to_string(n));
  }
}

TEST(SiluMulCpuTest, EdgeValues) {
  // 0 and -0, silu(g) -> g for large g, -> 0 for very negative g (expf(-g)
  // overflows to inf past g = -88.7), around the overflow point.
  const std::vector<float> gate = {0.0f, -0.0f, 1.0f, -1.0f, 30.0f, -30.0f, 88.0f,
                                   -88.0f, -89.0f, -100.0f, 1e-20f, -1e-20f};
  const std::vector<float> up(gate.size(), 1.5f);
  std::vector<float> out(gate.size());
  ASSERT_TRUE(cpu::SiluMul(gate.data(), up.data(), out.data(), gate.size()).ok());
  ExpectMatchesReference(gate, up, out, "edge values");
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[4], 45.0f);  // silu(30) rounds to 30 in float
  EXPECT_FALSE(std::isnan(out[9])) << "silu(-100) must be -0, not NaN";
}

TEST(SiluMulCpuTest, OutMayAliasGateOrUp) {
  const int64_t n = 333;
  const std::vector<float> gate = RandomVector(n, -6, 6, 11);
  const std::vector<float> up = RandomVector(n, -2, 2, 12);
  std::vector<float> want(n);
  ASSERT_TRUE(cpu::SiluMul(gate.data(), up.data(), want.data(), n).ok());

  std::vector<float> in_gate = gate;
  ASSERT_TRUE(cpu::SiluMul(in_gate.data(), up.data(), in_gate.data(), n).ok());
  EXPECT_EQ(in_gate, want);
  std::vector<float> in_up = up;
  ASSERT_TRUE(cpu::SiluMul(gate.data(), in_up.data(), in_up.data(), n).ok());
  EXPECT_EQ(in_up, want);
}

TEST(SiluMulCpuTest, RejectsBadArguments) {
  const float gate[2] = {1, 2};
  const float up[2] = {3, 4};
  float out[2] = {-7, -7};
  struct Case {
    const float* gate;
    const float* up;
    float* out;
    int64_t n;
    const char* names;  // the argument the message must name
  };
  const Case cases[] = {
      {nullptr, up, out, 2, "gate is null"},
      {gate, nullptr, out, 2, "up is null"},
      {gate, up, nullptr, 2, "out is null"},
      {gate, up, out, 0, "n (0)"},
      {gate, up, out, -2, "n (-2)"},
  };
  for (const Case& c : cases) {
    const absl::Status status = cpu::SiluMul(c.gate, c.up, c.out, c.n);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find("SiluMul"), std::string::npos) << status;
    EXPECT_NE(status.message().find(c.names), std::string::npos) << status;
  }
  EXPECT_EQ(out[0], -7.0f);
  EXPECT_EQ(out[1], -7.0f);
}

}  // namespace
}  // namespace octo
