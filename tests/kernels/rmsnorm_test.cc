// RMSNorm on the CPU against a double-precision reference. The CUDA version
// is checked against this one in tests/kernels/cuda/rmsnorm_cuda_test.cc.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/ops.h"
#include "tests/kernels/kernel_test_util.h"


namespace octo {
namespace {

using testing::ExpectClose;
using testing::RandomVector;
using testing::Tolerance;

// Tolerance, per element: |got - want| <= abs_tol + rel_tol * |want|.
//
// CPU vs double: the CPU version sums the squares in double, so what is left
// is a handful of float roundings of 2^-24 (6e-8) each: the square, the mean,
// mean + eps, sqrt, the division, two products; at most ~7 * 6e-8 = 4.2e-7.
// Measured on inputs like these (200 seeds): 2.1e-7 at worst. 1e-6 leaves
// room and still catches a float sum (SumsSquaresInDouble: off by 3e-5).
constexpr Tolerance kCpuVsDouble = {1e-6, 1e-7};
constexpr float kEps = 1e-5f;

struct Shape {
  int n_rows;
  int dim;
};

// dim: 1, not multiples of 32 (7, 33, 100, 1000), one warp, under and over
// one 1024-thread block, model sizes (4096, 8192).
constexpr Shape kShapes[] = {{1, 1},   {1, 7},    {3, 31},   {4, 32},    {4, 33},
                             {2, 100}, {64, 128}, {5, 1000}, {3, 1025},  {2, 4096},
                             {3, 8192}};

// The formula of ops.h in double throughout.
std::vector<double> ReferenceRmsNorm(const std::vector<float>& x, const std::vector<float>& weight,
                                     int n_rows, int dim, float eps) {
  std::vector<double> out(x.size());
  for (int r = 0; r < n_rows; ++r) {
    const size_t base = static_cast<size_t>(r) * dim;
    double ss = 0.0;
    for (int i = 0; i < dim; ++i) ss += static_cast<double>(x[base + i]) * x[base + i];
    const double scale = 1.0 / std::sqrt(ss / dim + static_cast<double>(eps));
    for (int i = 0; i < dim; ++i) out[base + i] = x[base + i] * scale * weight[i];
  }
  return out;
}

std::string Describe(const Shape& s) {
  return absl::StrFormat("n_rows=%d dim=%d", s.n_rows, s.dim);
}

// --- CPU ---------------------------------------------------------------------

TEST(RmsNormCpuTest, MatchesDoublePrecisionReference) {
  uint32_t seed = 1;
  for (const Shape& s : kShapes) {
    const size_t n = static_cast<size_t>(s.n_rows) * s.dim;
    const std::vector<float> x = RandomVector(n, -4.0f, 4.0f, seed++);
    const std::vector<float> weight = RandomVector(s.dim, 0.5f, 1.5f, seed++);
    std::vector<float> out(n);
    ASSERT_TRUE(cpu::RmsNorm(x.data(), weight.data(), out.data(), s.n_rows, s.dim, kEps).ok());
    ExpectClose(out, ReferenceRmsNorm(x, weight, s.n_rows, s.dim, kEps), s.dim, kCpuVsDouble,
                Describe(s));
  }
}

TEST(RmsNormCpuTest, ConstantRowHasClosedForm) {
  // x == 3 everywhere: mean(x^2) == 9, so out == 3 / sqrt(9 + eps) * weight.
  const int dim = 10;
  const float eps = 0.5f;
  const std::vector<float> x(dim, 3.0f);
  const std::vector<float> weight = {1, 2, 3, 4, 5, -1, -2, 0, 0.5f, 10};
  std::vector<float> out(dim);
  ASSERT_TRUE(cpu::RmsNorm(x.data(), weight.data(), out.data(), 1, dim, eps).ok());
  for (int i = 0; i < dim; ++i) {
    EXPECT_NEAR(out[i], 3.0 / std::sqrt(9.5) * weight[i], 1e-6) << "index " << i;
  }
}

// llama.cpp's CPU backend sums the squares in double; a float sum would drop
// every 1 added to 2^24 (the float spacing there is 2). Row: 4096 (square
// 2^24) then 1000 ones, so the exact sum is 2^24 + 1000, the float sum 2^24.
// The expected values follow ggml's steps: mean rounded to float, then
// 1.0f / sqrtf(mean + eps), then (x * scale) * weight, all in float.
TEST(RmsNormCpuTest, SumsSquaresInDouble) {
  const int dim = 1001;
  std::vector<float> x(dim, 1.0f);
  x[0] = 4096.0f;
  const std::vector<float> weight(dim, 0.75f);
  std::vector<float> out(dim);
  ASSERT_TRUE(cpu::RmsNorm(x.data(), weight.data(), out.data(), 1, dim, kEps).ok());

  const float mean = static_cast<float>((16777216.0 + 1000.0) / dim);
  const float scale = 1.0f / std::sqrt(mean + kEps);
  EXPECT_EQ(out[0], (4096.0f * scale) * 0.75f);
  EXPECT_EQ(out[1], scale * 0.75f);
  EXPECT_EQ(out[dim - 1], scale * 0.75f);
}

TEST(RmsNormCpuTest, InPlaceGivesSameResult) {
  const int n_rows = 3, dim = 257;
  std::vector<float> x = RandomVector(n_rows * dim, -2.0f, 2.0f, 7);
  const std::vector<float> weight = RandomVector(dim, 0.5f, 1.5f, 8);
  std::vector<float> out(x.size());
  ASSERT_TRUE(cpu::RmsNorm(x.data(), weight.data(), out.data(), n_rows, dim, kEps).ok());
  ASSERT_TRUE(cpu::RmsNorm(x.data(), weight.data(), x.data(), n_rows, dim, kEps).ok());
  EXPECT_EQ(x, out);
}

// --- Preconditions, shared by both versions ------------------------------------

using RmsNormFn = std::function<absl::Status(const float* x, const float* weight, float* out,
                                             int n_rows, int dim, float eps)>;

// Every broken precondition gives INVALID_ARGUMENT and leaves out untouched.
void ExpectRejectsBadArguments(const RmsNormFn& rms_norm) {
  const float x[4] = {1, 2, 3, 4};
  const float weight[2] = {1, 1};
  float out[4] = {-7, -7, -7, -7};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* name;
    const float* x;
    const float* weight;
    float* out;
    int n_rows;
    int dim;
    float eps;
  };
  const Case cases[] = {
      {"null x", nullptr, weight, out, 2, 2, kEps},
      {"null weight", x, nullptr, out, 2, 2, kEps},
      {"null out", x, weight, nullptr, 2, 2, kEps},
      {"zero rows", x, weight, out, 0, 2, kEps},
      {"negative rows", x, weight, out, -1, 2, kEps},
      {"zero dim", x, weight, out, 2, 0, kEps},
      {"negative dim", x, weight, out, 2, -3, kEps},
      {"negative eps", x, weight, out, 2, 2, -1e-6f},
      {"NaN eps", x, weight, out, 2, 2, nan},
  };
  for (const Case& c : cases) {
    const absl::Status status = rms_norm(c.x, c.weight, c.out, c.n_rows, c.dim, c.eps);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name << ": " << status;
    EXPECT_NE(status.message().find("RmsNorm"), std::string::npos) << c.name << ": " << status;
  }
  for (float f : out) EXPECT_EQ(f, -7.0f) << "a rejected call wrote to out";
}

TEST(RmsNormCpuTest, RejectsBadArguments) { ExpectRejectsBadArguments(cpu::RmsNorm); }

TEST(RmsNormCpuTest, ZeroEpsIsAllowed) {
  const float x[2] = {3, 4};  // mean(x^2) == 12.5
  const float weight[2] = {1, 1};
  float out[2];
  ASSERT_TRUE(cpu::RmsNorm(x, weight, out, 1, 2, 0.0f).ok());
  EXPECT_NEAR(out[0], 3 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(out[1], 4 / std::sqrt(12.5), 1e-6);
}


}  // namespace
}  // namespace octo
