// LayerNorm on the CPU against a double-precision reference, closed forms,
// the double sums and aliasing. The CUDA version is checked against this one
// in tests/kernels/cuda/layer_norm_cuda_test.cc.
#include <cmath>
#include <cstddef>
#include <cstdint>
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
// The sums are in double, so what is left is a few float roundings of 2^-24
// (6e-8) each: the mean (its error reaches every v_i as 2^-24 |mean|), each
// v_i, its square, the variance, + eps, sqrt, the division, the two
// products and the bias. With |mean| up to 4 and outputs of a few units
// that is a few 1e-7 absolute; 1e-6 on each part leaves room and still
// catches a float sum of x (off by ~1e-5 at dim 8192 with an offset of 3)
// or a variance over dim - 1 (off by 1/(2 dim) relative, 6e-5 at dim 8192).
constexpr Tolerance kCpuVsDouble = {1e-6, 1e-6};
constexpr float kEps = 1e-12f;  // BERT's layer_norm_eps

struct Shape {
  int n_rows;
  int dim;
};

// dim: 1, not multiples of 32, one warp, under and over one 1024-thread
// block, encoder sizes (384, 768, 1024) and a large one (8192).
constexpr Shape kShapes[] = {{1, 1},   {1, 7},   {3, 31},  {4, 32},   {4, 33},  {2, 100},
                             {8, 384}, {5, 768}, {3, 1024}, {3, 1025}, {2, 8192}};

// The formula of ops.h in double throughout.
std::vector<double> ReferenceLayerNorm(const std::vector<float>& x, const std::vector<float>& weight,
                                       const std::vector<float>& bias, int n_rows, int dim, float eps) {
  std::vector<double> out(x.size());
  for (int r = 0; r < n_rows; ++r) {
    const size_t base = static_cast<size_t>(r) * dim;
    double sum = 0.0;
    for (int i = 0; i < dim; ++i) sum += x[base + i];
    const double mean = sum / dim;
    double ss = 0.0;
    for (int i = 0; i < dim; ++i) ss += (x[base + i] - mean) * (x[base + i] - mean);
    const double scale = 1.0 / std::sqrt(ss / dim + static_cast<double>(eps));
    for (int i = 0; i < dim; ++i) out[base + i] = (x[base + i] - mean) * scale * weight[i] + bias[i];
  }
  return out;
}

std::string Describe(const Shape& s) { return absl::StrFormat("n_rows=%d dim=%d", s.n_rows, s.dim); }

TEST(LayerNormCpuTest, MatchesDoublePrecisionReference) {
  uint32_t seed = 1;
  for (const Shape& s : kShapes) {
    for (float offset : {0.0f, 3.0f}) {  // a row mean near 0, and one far from it
      const size_t n = static_cast<size_t>(s.n_rows) * s.dim;
      std::vector<float> x = RandomVector(n, -4.0f, 4.0f, seed++);
      for (float& f : x) f += offset;
      const std::vector<float> weight = RandomVector(s.dim, 0.5f, 1.5f, seed++);
      const std::vector<float> bias = RandomVector(s.dim, -1.0f, 1.0f, seed++);
      std::vector<float> out(n);
      ASSERT_TRUE(cpu::LayerNorm(x.data(), weight.data(), bias.data(), out.data(), s.n_rows, s.dim, kEps).ok());
      ExpectClose(out, ReferenceLayerNorm(x, weight, bias, s.n_rows, s.dim, kEps), s.dim, kCpuVsDouble,
                  Describe(s) + absl::StrFormat(" offset=%g", offset));
    }
  }
}

// x = {1, 3}: mean 2, v = -1 and 1, variance 1, so out = -+ 1 / sqrt(1 + eps)
// * weight + bias; a constant row has v = 0 everywhere and gives bias exactly.
TEST(LayerNormCpuTest, ClosedForms) {
  const float x[2] = {1.0f, 3.0f};
  const float weight[2] = {2.0f, 0.5f};
  const float bias[2] = {0.25f, -1.0f};
  float out[2];
  ASSERT_TRUE(cpu::LayerNorm(x, weight, bias, out, 1, 2, 0.5f).ok());
  EXPECT_NEAR(out[0], -2.0 / std::sqrt(1.5) + 0.25, 1e-6);
  EXPECT_NEAR(out[1], 0.5 / std::sqrt(1.5) - 1.0, 1e-6);

  const int dim = 10;
  const std::vector<float> constant(dim, 3.0f);
  const std::vector<float> w = RandomVector(dim, 0.5f, 1.5f, 3);
  const std::vector<float> b = RandomVector(dim, -1.0f, 1.0f, 4);
  std::vector<float> got(dim);
  ASSERT_TRUE(cpu::LayerNorm(constant.data(), w.data(), b.data(), got.data(), 1, dim, kEps).ok());
  EXPECT_EQ(got, b);
}

// llama.cpp's CPU norm sums in double; a float sum would drop every 1 added
// to 2^24 (the float spacing there is 2). Row: 2^24 then 1000 ones, so the
// exact sum is 2^24 + 1000, the float sum 2^24. The expected values follow
// ops.h's steps in float.
TEST(LayerNormCpuTest, SumsInDouble) {
  const int dim = 1001;
  std::vector<float> x(dim, 1.0f);
  x[0] = 16777216.0f;
  const std::vector<float> weight(dim, 0.75f);
  const std::vector<float> bias(dim, 0.125f);
  std::vector<float> out(dim);
  ASSERT_TRUE(cpu::LayerNorm(x.data(), weight.data(), bias.data(), out.data(), 1, dim, kEps).ok());

  const float mean = static_cast<float>((16777216.0 + 1000.0) / dim);
  const float v0 = 16777216.0f - mean, v1 = 1.0f - mean;
  const float variance =
      static_cast<float>((static_cast<double>(v0 * v0) + 1000.0 * static_cast<double>(v1 * v1)) / dim);
  const float scale = 1.0f / std::sqrt(variance + kEps);
  EXPECT_EQ(out[0], (v0 * scale) * 0.75f + 0.125f);
  EXPECT_EQ(out[1], (v1 * scale) * 0.75f + 0.125f);
  EXPECT_EQ(out[dim - 1], out[1]);
}

TEST(LayerNormCpuTest, InPlaceGivesSameResult) {
  const int n_rows = 3, dim = 257;
  std::vector<float> x = RandomVector(n_rows * dim, -2.0f, 2.0f, 7);
  const std::vector<float> weight = RandomVector(dim, 0.5f, 1.5f, 8);
  const std::vector<float> bias = RandomVector(dim, -1.0f, 1.0f, 9);
  std::vector<float> out(x.size());
  ASSERT_TRUE(cpu::LayerNorm(x.data(), weight.data(), bias.data(), out.data(), n_rows, dim, kEps).ok());
  ASSERT_TRUE(cpu::LayerNorm(x.data(), weight.data(), bias.data(), x.data(), n_rows, dim, kEps).ok());
  EXPECT_EQ(x, out);
}

TEST(LayerNormCpuTest, ZeroEpsGivesNanForAConstantRow) {
  const float x[2] = {5, 5};
  const float weight[2] = {1, 1};
  const float bias[2] = {0, 0};
  float out[2];
  ASSERT_TRUE(cpu::LayerNorm(x, weight, bias, out, 1, 2, 0.0f).ok());
  EXPECT_TRUE(std::isnan(out[0]) && std::isnan(out[1]));  // 0 * inf
}

// Every broken precondition gives INVALID_ARGUMENT naming the op and the
// argument, and leaves out untouched.
TEST(LayerNormCpuTest, RejectsBadArguments) {
  const float x[4] = {1, 2, 3, 4};
  const float weight[2] = {1, 1};
  const float bias[2] = {0, 0};
  float out[4] = {-7, -7, -7, -7};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const float* x;
    const float* weight;
    const float* bias;
    float* out;
    int n_rows;
    int dim;
    float eps;
    const char* needle;
  };
  const Case cases[] = {
      {nullptr, weight, bias, out, 2, 2, kEps, "x is null"},
      {x, nullptr, bias, out, 2, 2, kEps, "weight is null"},
      {x, weight, nullptr, out, 2, 2, kEps, "bias is null"},
      {x, weight, bias, nullptr, 2, 2, kEps, "out is null"},
      {x, weight, bias, out, 0, 2, kEps, "n_rows (0)"},
      {x, weight, bias, out, 2, -3, kEps, "dim (-3)"},
      {x, weight, bias, out, 2, 2, -1e-6f, "eps"},
      {x, weight, bias, out, 2, 2, nan, "eps (nan)"},
  };
  for (const Case& c : cases) {
    const absl::Status status = cpu::LayerNorm(c.x, c.weight, c.bias, c.out, c.n_rows, c.dim, c.eps);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.needle << ": " << status;
    EXPECT_NE(status.message().find("LayerNorm"), std::string::npos) << status;
    EXPECT_NE(status.message().find(c.needle), std::string::npos) << c.needle << ": " << status;
  }
  for (float f : out) EXPECT_EQ(f, -7.0f) << "a rejected call wrote to out";
}

}  // namespace
}  // namespace octo
