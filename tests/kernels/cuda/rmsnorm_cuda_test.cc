// cuda::RmsNorm against cpu::RmsNorm on the same inputs.
#include <limits>
#include <utility>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "kernels/cuda/api_counts.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

using testing::ExpectClose;
using testing::RandomVector;
using testing::Tolerance;

// The CUDA version sums dim squares in float (a tree). That sum's rounding
// error grows like sqrt(dim) * 2^-24 for inputs like these (the bound is
// dim * 2^-24), the scale, a square root, carries half of it, and the rest is
// a few roundings of 2^-24 each. Measured with a float-summing CPU version
// (200 seeds, dim 8192): 2.3e-6 at worst vs double, and a host emulation of
// the CUDA summation order 2.5e-6. 1e-5 leaves 4x room and still catches a
// wrong formula, a skipped element or a wrong eps. The absolute part matters
// near 0.
constexpr Tolerance kCudaVsCpu = {1e-5, 1e-6};
constexpr float kEps = 1e-5f;

class RmsNormCudaTest : public testing::CudaOpTest {
 protected:
  // cuda::RmsNorm of x; `in_place` passes x's own buffer as out.
  std::vector<float> Run(const std::vector<float>& x, const std::vector<float>& weight, int n_rows, int dim,
                         bool in_place) {
    auto d_x = Upload(x);
    auto d_weight = Upload(weight);
    auto d_out = Output<float>(x.size());
    float* out = in_place ? d_x.get() : d_out.get();
    const absl::Status launched = cuda::RmsNorm(d_x.get(), d_weight.get(), out, n_rows, dim, kEps, stream());
    EXPECT_TRUE(launched.ok()) << launched;
    return in_place ? d_x.Download(stream()) : d_out.Download(stream());
  }
};

// dim: 1, not multiples of 32 (7, 33, 100, 1000), one warp, under and over
// one 1024-thread block, model sizes (4096, 8192), and rows too wide for
// the block to hold in registers (9000, 16384: read from memory each step).
TEST_F(RmsNormCudaTest, MatchesCpu) {
  struct Shape {
    int n_rows, dim;
  };
  uint32_t seed = 100;
  for (const Shape& s : {Shape{1, 1}, Shape{1, 7}, Shape{3, 31}, Shape{4, 32}, Shape{4, 33}, Shape{2, 100},
                         Shape{64, 128}, Shape{5, 1000}, Shape{3, 1025}, Shape{2, 4096}, Shape{3, 8192},
                         Shape{2, 9000}, Shape{1, 16384}}) {
    const size_t n = static_cast<size_t>(s.n_rows) * s.dim;
    const std::vector<float> x = RandomVector(n, -4.0f, 4.0f, seed++);
    const std::vector<float> weight = RandomVector(s.dim, 0.5f, 1.5f, seed++);
    std::vector<float> want(n);
    ASSERT_TRUE(cpu::RmsNorm(x.data(), weight.data(), want.data(), s.n_rows, s.dim, kEps).ok());
    ExpectClose(Run(x, weight, s.n_rows, s.dim, /*in_place=*/false), want, s.dim, kCudaVsCpu,
                absl::StrFormat("n_rows=%d dim=%d", s.n_rows, s.dim));
  }
}

TEST_F(RmsNormCudaTest, InPlaceMatchesCpu) {
  const int n_rows = 5, dim = 4096;
  const std::vector<float> x = RandomVector(n_rows * dim, -4.0f, 4.0f, 42);
  const std::vector<float> weight = RandomVector(dim, 0.5f, 1.5f, 43);
  std::vector<float> want(x.size());
  ASSERT_TRUE(cpu::RmsNorm(x.data(), weight.data(), want.data(), n_rows, dim, kEps).ok());
  ExpectClose(Run(x, weight, n_rows, dim, /*in_place=*/true), want, dim, kCudaVsCpu, "in place");
}

// The fused residual add: x comes out as Add's x + delta and out as
// RmsNorm's of it, bit for bit, in one launch, with out a separate buffer or
// delta itself (as the forward pass calls it).
TEST_F(RmsNormCudaTest, AddRmsNormIsAddThenRmsNormInOneLaunch) {
  uint32_t seed = 500;
  for (const auto& [n_rows, dim] : {std::pair{1, 7}, std::pair{3, 1000}, std::pair{2, 4096}, std::pair{2, 9000}}) {
    for (bool out_is_delta : {false, true}) {
      SCOPED_TRACE(absl::StrFormat("%d x %d, out %s", n_rows, dim, out_is_delta ? "= delta" : "apart"));
      const size_t n = static_cast<size_t>(n_rows) * dim;
      const std::vector<float> x = RandomVector(n, -4.0f, 4.0f, seed++);
      const std::vector<float> delta = RandomVector(n, -1.0f, 1.0f, seed++);
      const std::vector<float> weight = RandomVector(dim, 0.5f, 1.5f, seed++);
      // Two launches.
      auto x_two = Upload(x);
      auto delta_two = Upload(delta);
      auto weight_d = Upload(weight);
      auto out_two = Output<float>(n);
      ASSERT_TRUE(cuda::Add(x_two.get(), delta_two.get(), x_two.get(), static_cast<int64_t>(n), stream()).ok());
      ASSERT_TRUE(cuda::RmsNorm(x_two.get(), weight_d.get(), out_two.get(), n_rows, dim, kEps, stream()).ok());
      // One.
      auto x_one = Upload(x);
      auto delta_one = Upload(delta);
      auto out_one = Output<float>(n);
      float* out = out_is_delta ? delta_one.get() : out_one.get();
      const cuda::ApiCounts before = cuda::CurrentApiCounts();
      ASSERT_TRUE(cuda::AddRmsNorm(x_one.get(), delta_one.get(), weight_d.get(), out, n_rows, dim, kEps, stream()).ok());
      EXPECT_EQ((cuda::CurrentApiCounts() - before).launches, 1u);
      EXPECT_EQ(x_one.Download(stream()), x_two.Download(stream()));
      EXPECT_EQ((out_is_delta ? delta_one : out_one).Download(stream()), out_two.Download(stream()));
    }
  }
  auto a = Upload(std::vector<float>(64, 1.0f));
  auto w = Upload(std::vector<float>(64, 1.0f));
  EXPECT_EQ(cuda::AddRmsNorm(a.get(), a.get(), w.get(), Output<float>(64).get(), 1, 64, kEps, stream()).code(),
            absl::StatusCode::kInvalidArgument)
      << "x and delta the same buffer";
  EXPECT_EQ(cuda::AddRmsNorm(a.get(), nullptr, w.get(), Output<float>(64).get(), 1, 64, kEps, stream()).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RmsNormCudaTest, RejectsBadArgumentsWithoutLaunching) {
  auto x = Upload(std::vector<float>{1, 2, 3, 4});
  auto weight = Upload(std::vector<float>{1, 1});
  auto out = Output<float>(4);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const float* x;
    const float* weight;
    float* out;
    int n_rows, dim;
    float eps;
    std::string needle;
  };
  for (const Case& c : {Case{nullptr, weight.get(), out.get(), 2, 2, kEps, "null pointer"},
                        Case{x.get(), nullptr, out.get(), 2, 2, kEps, "null pointer"},
                        Case{x.get(), weight.get(), nullptr, 2, 2, kEps, "null pointer"},
                        Case{x.get(), weight.get(), out.get(), 0, 2, kEps, "n_rows (0)"},
                        Case{x.get(), weight.get(), out.get(), 2, -3, kEps, "dim (-3)"},
                        Case{x.get(), weight.get(), out.get(), 2, 2, -1e-6f, "eps"},
                        Case{x.get(), weight.get(), out.get(), 2, 2, nan, "eps"}}) {
    testing::ExpectInvalidArgument(cuda::RmsNorm(c.x, c.weight, c.out, c.n_rows, c.dim, c.eps, stream()),
                                   "RmsNorm", c.needle);
  }
  for (float f : out.Download(stream())) EXPECT_TRUE(std::isnan(f)) << "a rejected call wrote to out";
}

}  // namespace
}  // namespace octo
