// Gelu on the CPU: the llama.cpp formula of ops.h exactly, its fp16 rounding
// of input and output, the cut-offs at -10 and 10, the real GELU-tanh to
// fp16 precision, aliasing and the argument checks.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "kernels/half.h"
#include "kernels/ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

using testing::ExpectSameBits;
using testing::RandomVector;

float RoundToHalf(float x) { return Fp16ToFp32(Fp32ToFp16(x)); }

// ops.h's contract, step by step (what llama.cpp's table holds for fp16(x)).
float ContractGelu(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  const float h = RoundToHalf(x);
  const float inner = 0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h);
  return RoundToHalf(0.5f * h * (1.0f + std::tanh(inner)));
}

// GELU's tanh approximation in double, on the exact input.
double GeluTanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

std::vector<float> RunGelu(const std::vector<float>& x) {
  std::vector<float> out(x.size(), -7.0f);
  const absl::Status status = cpu::Gelu(x.data(), out.data(), static_cast<int64_t>(x.size()));
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// Every fp16 value in (-10, 10) (the inputs llama.cpp's table covers), and
// random floats over [-12, 12), each exactly as the contract computes it.
TEST(GeluCpuTest, IsTheContractFormulaBitForBit) {
  std::vector<float> x;
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float h = Fp16ToFp32(static_cast<uint16_t>(bits));
    if (std::abs(h) < 10.0f) x.push_back(h);
  }
  const std::vector<float> random = RandomVector(100003, -12.0f, 12.0f, 1);
  x.insert(x.end(), random.begin(), random.end());
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = ContractGelu(x[i]);
  ExpectSameBits(RunGelu(x), want, "fp16 sweep and random floats");
}

// Inside (-10, 10) the input is rounded to fp16 (nearest, ties to even)
// before gelu, and the result is an fp16 value.
TEST(GeluCpuTest, RoundsInputAndOutputToFp16) {
  // Around 1 the fp16 spacing is 2^-10: 1 + 2^-13 rounds to 1; 1 + 2^-11 is
  // a tie that goes to the even 1, 1 + 3 * 2^-11 one that goes to the even
  // 1 + 2^-9; 1 + 2^-11 + 2^-20 is past the tie and goes to 1 + 2^-10.
  const std::vector<float> x = {1.0f,
                                1.0f + 0x1p-13f,
                                1.0f + 0x1p-11f,
                                1.0f + 3 * 0x1p-11f,
                                1.0f + 0x1p-9f,
                                1.0f + 0x1p-11f + 0x1p-20f,
                                1.0f + 0x1p-10f};
  const std::vector<float> out = RunGelu(x);
  EXPECT_EQ(out[1], out[0]);
  EXPECT_EQ(out[2], out[0]);
  EXPECT_EQ(out[3], out[4]);
  EXPECT_EQ(out[5], out[6]);
  EXPECT_NE(out[6], out[0]);

  const std::vector<float> random = RunGelu(RandomVector(10000, -9.99f, 9.99f, 2));
  for (float g : random) ASSERT_EQ(g, RoundToHalf(g)) << "not an fp16 value";
}

// x <= -10 gives 0 and x >= 10 gives x itself (not rounded to fp16), as
// llama.cpp's CPU path skips its table there; just inside, the table.
TEST(GeluCpuTest, CutOffsAtTen) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {-10.0f, -10.001f, -1e30f, -inf, 10.0f, 10.001f, 12345.678f, 1e30f, inf,
                                std::nextafter(-10.0f, 0.0f), std::nextafter(10.0f, 0.0f)};
  const std::vector<float> out = RunGelu(x);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(std::bit_cast<uint32_t>(out[i]), 0u) << x[i] << " gives +0";
  for (int i = 4; i < 9; ++i) EXPECT_EQ(out[i], x[i]) << x[i] << " gives itself";
  // Just inside: fp16(-9.999999) = -10, where tanhf is -1 in float, so
  // gelu is -5 * 0 = -0; fp16(9.999999) = 10, and gelu(10) = 10.
  EXPECT_EQ(std::bit_cast<uint32_t>(out[9]), 0x80000000u) << "gelu(-9.999999) is -0";
  EXPECT_EQ(out[10], 10.0f);
}

// How far the output may be from the double GELU-tanh at an fp16-exact x:
// half an fp16 ulp of the result (2^-11 relative; 2^-25 absolute among the
// subnormals), plus the float evaluation's error, which is absolute in the
// negative tail: there 1 + tanhf(...) nears 0 and keeps only the 2^-24
// spacing of the floats below 1, plus tanhf's ulp (together 2^-22 at most),
// times 0.5 |x|; elsewhere a few float roundings (1e-6 relative).
double Fp16Tolerance(float x, double want) {
  return (0x1p-11 + 1e-6) * std::abs(want) + 0.5 * std::abs(x) * 0x1p-22 + 0x1p-25;
}

// The real GELU-tanh, to fp16 precision (Fp16Tolerance). Known values:
// gelu(1) = 0.841192, gelu(-1) = -0.158808, gelu(2) = 1.954598.
TEST(GeluCpuTest, MatchesGeluTanhToFp16Precision) {
  struct Known {
    float x;
    double gelu;
  };
  const Known known[] = {{-3.0f, -0.0036373920817729943}, {-1.0f, -0.15880800939172324},
                         {-0.5f, -0.15428599017485606},   {0.5f, 0.34571400982514394},
                         {1.0f, 0.8411919906082768},      {2.0f, 1.954597694087775},
                         {3.0f, 2.996362607918227},       {5.0f, 4.999999770820381}};
  for (const Known& k : known) {
    const float got = RunGelu({k.x})[0];
    EXPECT_NEAR(got, k.gelu, Fp16Tolerance(k.x, k.gelu)) << "gelu(" << k.x << ")";
    EXPECT_NEAR(GeluTanh(k.x), k.gelu, 1e-12) << "the table above";
  }
  EXPECT_EQ(RunGelu({0.0f})[0], 0.0f);

  // Every fp16 input in (-10, 10).
  size_t misses = 0;
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float h = Fp16ToFp32(static_cast<uint16_t>(bits));
    if (!(std::abs(h) < 10.0f)) continue;
    const double want = GeluTanh(h);
    if (!(std::abs(RunGelu({h})[0] - want) <= Fp16Tolerance(h, want)) && misses++ == 0) {
      ADD_FAILURE() << "gelu(" << h << "): got " << RunGelu({h})[0] << ", want " << want;
    }
  }
  EXPECT_EQ(misses, 0u);
}

TEST(GeluCpuTest, NanStaysNan) {
  EXPECT_TRUE(std::isnan(RunGelu({std::numeric_limits<float>::quiet_NaN()})[0]));
}

TEST(GeluCpuTest, OutMayBeX) {
  std::vector<float> x = RandomVector(1000, -12.0f, 12.0f, 3);
  const std::vector<float> want = RunGelu(x);
  ASSERT_TRUE(cpu::Gelu(x.data(), x.data(), static_cast<int64_t>(x.size())).ok());
  EXPECT_EQ(x, want);
}

TEST(GeluCpuTest, RejectsBadArguments) {
  const float x[2] = {1, 2};
  float out[2] = {-7, -7};
  struct Case {
    const float* x;
    float* out;
    int64_t n;
    const char* needle;
  };
  const Case cases[] = {{nullptr, out, 2, "x is null"}, {x, nullptr, 2, "out is null"}, {x, out, 0, "n (0)"},
                        {x, out, -2, "n (-2)"}};
  for (const Case& c : cases) {
    const absl::Status status = cpu::Gelu(c.x, c.out, c.n);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find("Gelu"), std::string::npos) << status;
    EXPECT_NE(status.message().find(c.needle), std::string::npos) << status;
  }
  EXPECT_EQ(out[0], -7.0f);
  EXPECT_EQ(out[1], -7.0f);
}

}  // namespace
}  // namespace octo
