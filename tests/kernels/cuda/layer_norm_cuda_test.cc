// cuda::LayerNorm against cpu::LayerNorm on the same inputs.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

using testing::ExpectClose;
using testing::RandomVector;
using testing::Tolerance;

// Both sum the same floats in double, in another order; the float mean and
// variance differ only where the two double sums round to either side of a
// float rounding boundary (ops.h). A mean one float ulp off moves every
// v_i by up to 2^-24 |mean| (2.4e-7 at |mean| 4), and the variance one ulp
// off moves scale by 2^-25 relative; through the weight (<= 1.5) that is
// under 1e-6 absolute for outputs of a few units. 1e-6 on each part bounds
// it, and a wrong mean, variance, eps or element is off by far more.
// Measured (executor, these shapes): bit for bit.
constexpr Tolerance kCudaVsCpu = {1e-6, 1e-6};
constexpr float kEps = 1e-12f;

class LayerNormCudaTest : public testing::CudaOpTest {
 protected:
  // cuda::LayerNorm of x; `in_place` passes x's own buffer as out.
  std::vector<float> Run(const std::vector<float>& x, const std::vector<float>& weight, const std::vector<float>& bias,
                         int n_rows, int dim, bool in_place) {
    auto d_x = Upload(x);
    auto d_weight = Upload(weight);
    auto d_bias = Upload(bias);
    auto d_out = Output<float>(x.size());
    float* out = in_place ? d_x.get() : d_out.get();
    const absl::Status launched =
        cuda::LayerNorm(d_x.get(), d_weight.get(), d_bias.get(), out, n_rows, dim, kEps, stream());
    EXPECT_TRUE(launched.ok()) << launched;
    return in_place ? d_x.Download(stream()) : d_out.Download(stream());
  }
};

// dim: 1, not multiples of 32, one warp, under and over one 1024-thread
// block, encoder sizes (384, 768, 1024) and 8192 (eight elements a thread);
// rows with a mean near 0 and far from it.
TEST_F(LayerNormCudaTest, MatchesCpu) {
  struct Shape {
    int n_rows, dim;
  };
  uint32_t seed = 100;
  size_t same = 0, total = 0;
  for (const Shape& s : {Shape{1, 1}, Shape{1, 7}, Shape{3, 31}, Shape{4, 32}, Shape{4, 33}, Shape{2, 100},
                         Shape{8, 384}, Shape{5, 768}, Shape{3, 1024}, Shape{3, 1025}, Shape{2, 8192}}) {
    for (float offset : {0.0f, 3.0f}) {
      const size_t n = static_cast<size_t>(s.n_rows) * s.dim;
      std::vector<float> x = RandomVector(n, -4.0f, 4.0f, seed++);
      for (float& f : x) f += offset;
      const std::vector<float> weight = RandomVector(s.dim, 0.5f, 1.5f, seed++);
      const std::vector<float> bias = RandomVector(s.dim, -1.0f, 1.0f, seed++);
      std::vector<float> want(n);
      ASSERT_TRUE(
          cpu::LayerNorm(x.data(), weight.data(), bias.data(), want.data(), s.n_rows, s.dim, kEps).ok());
      const std::vector<float> got = Run(x, weight, bias, s.n_rows, s.dim, /*in_place=*/false);
      ExpectClose(got, want, s.dim, kCudaVsCpu,
                  absl::StrFormat("n_rows=%d dim=%d offset=%g", s.n_rows, s.dim, offset));
      for (size_t i = 0; i < n; ++i) same += got[i] == want[i];
      total += n;
    }
  }
  std::printf("%zu of %zu outputs bit for bit the CPU's\n", same, total);
}

TEST_F(LayerNormCudaTest, InPlaceMatchesCpu) {
  const int n_rows = 5, dim = 768;
  const std::vector<float> x = RandomVector(n_rows * dim, -4.0f, 4.0f, 42);
  const std::vector<float> weight = RandomVector(dim, 0.5f, 1.5f, 43);
  const std::vector<float> bias = RandomVector(dim, -1.0f, 1.0f, 44);
  std::vector<float> want(x.size());
  ASSERT_TRUE(cpu::LayerNorm(x.data(), weight.data(), bias.data(), want.data(), n_rows, dim, kEps).ok());
  ExpectClose(Run(x, weight, bias, n_rows, dim, /*in_place=*/true), want, dim, kCudaVsCpu, "in place");
}

TEST_F(LayerNormCudaTest, RejectsBadArgumentsWithoutLaunching) {
  auto x = Upload(std::vector<float>{1, 2, 3, 4});
  auto weight = Upload(std::vector<float>{1, 1});
  auto bias = Upload(std::vector<float>{0, 0});
  auto out = Output<float>(4);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const float* x;
    const float* weight;
    const float* bias;
    float* out;
    int n_rows, dim;
    float eps;
    std::string needle;
  };
  for (const Case& c : {Case{nullptr, weight.get(), bias.get(), out.get(), 2, 2, kEps, "x is null"},
                        Case{x.get(), nullptr, bias.get(), out.get(), 2, 2, kEps, "weight is null"},
                        Case{x.get(), weight.get(), nullptr, out.get(), 2, 2, kEps, "bias is null"},
                        Case{x.get(), weight.get(), bias.get(), nullptr, 2, 2, kEps, "out is null"},
                        Case{x.get(), weight.get(), bias.get(), out.get(), 0, 2, kEps, "n_rows (0)"},
                        Case{x.get(), weight.get(), bias.get(), out.get(), 2, -3, kEps, "dim (-3)"},
                        Case{x.get(), weight.get(), bias.get(), out.get(), 2, 2, -1e-6f, "eps"},
                        Case{x.get(), weight.get(), bias.get(), out.get(), 2, 2, nan, "eps"}}) {
    testing::ExpectInvalidArgument(cuda::LayerNorm(c.x, c.weight, c.bias, c.out, c.n_rows, c.dim, c.eps, stream()),
                                   "LayerNorm", c.needle);
  }
  for (float f : out.Download(stream())) EXPECT_TRUE(std::isnan(f)) << "a rejected call wrote to out";
}

}  // namespace
}  // namespace octo
