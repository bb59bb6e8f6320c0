// cuda::Add and cuda::AddBias against their CPU twins: one float addition
// per element, so the same bits (tolerance 0), aliasing included; a NaN
// result is any NaN.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
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

using testing::RandomVector;

using testing::ExpectSameBitsAnyNan;

// n values in [-100, 100) with the corner cases of a float addition sprinkled
// in: infinities, signed zeros, subnormals (the GPU keeps them: no
// --use_fast_math, so no flush to zero) and values that overflow when added.
// No NaN input, but inf + -inf makes one, and a GPU's NaN bits are its own
// (the executor computes on the host and gives the CPU's): any NaN matches.
std::vector<float> Values(size_t n, uint32_t seed) {
  std::vector<float> v = RandomVector(n, -100.0f, 100.0f, seed);
  const float specials[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 0.0f,
                            -0.0f, std::numeric_limits<float>::denorm_min(), -1e-40f,
                            std::numeric_limits<float>::max(), 3e38f};
  for (size_t i = seed % 13; i < n; i += 13) v[i] = specials[(i / 13) % std::size(specials)];
  return v;
}

class AddCudaTest : public testing::CudaOpTest {};

// n: 1, under a warp, around one 256-thread block, and past the grid's
// 65536 threads (so threads stride).
TEST_F(AddCudaTest, MatchesCpuBitForBit) {
  uint32_t seed = 1;
  for (int64_t n : {1, 7, 255, 256, 257, 1000, 4096, 200003}) {
    const std::vector<float> a = Values(n, seed++);
    const std::vector<float> b = Values(n, seed++);
    std::vector<float> want(n);
    ASSERT_TRUE(cpu::Add(a.data(), b.data(), want.data(), n).ok());

    auto d_a = Upload(a);
    auto d_b = Upload(b);
    auto d_out = Output<float>(n);
    ASSERT_TRUE(cuda::Add(d_a.get(), d_b.get(), d_out.get(), n, stream()).ok());
    ExpectSameBitsAnyNan(d_out.Download(stream()), want, absl::StrFormat("n=%d", n));
  }
}

// out may be a, b, or both when a and b are one buffer (x + x).
TEST_F(AddCudaTest, InPlaceMatchesCpu) {
  const int64_t n = 70001;
  const std::vector<float> a = Values(n, 40);
  const std::vector<float> b = Values(n, 41);
  std::vector<float> a_plus_b(n), a_plus_a(n);
  ASSERT_TRUE(cpu::Add(a.data(), b.data(), a_plus_b.data(), n).ok());
  ASSERT_TRUE(cpu::Add(a.data(), a.data(), a_plus_a.data(), n).ok());

  auto d_a = Upload(a);
  auto d_b = Upload(b);
  ASSERT_TRUE(cuda::Add(d_a.get(), d_b.get(), d_a.get(), n, stream()).ok());
  ExpectSameBitsAnyNan(d_a.Download(stream()), a_plus_b, "out == a");

  d_a = Upload(a);
  ASSERT_TRUE(cuda::Add(d_a.get(), d_b.get(), d_b.get(), n, stream()).ok());
  ExpectSameBitsAnyNan(d_b.Download(stream()), a_plus_b, "out == b");

  ASSERT_TRUE(cuda::Add(d_a.get(), d_a.get(), d_a.get(), n, stream()).ok());
  ExpectSameBitsAnyNan(d_a.Download(stream()), a_plus_a, "out == a == b");
}

// Widths: 1, odd, a block's worth, model widths (qwen2's q 3584, k/v 512,
// 4096), and a call past the grid's 65536 threads (300 x 257).
TEST_F(AddCudaTest, AddBiasMatchesCpuBitForBit) {
  struct Shape {
    int n_rows, width;
  };
  uint32_t seed = 100;
  for (const Shape& s : {Shape{1, 1}, Shape{3, 7}, Shape{1, 256}, Shape{5, 1000}, Shape{9, 512}, Shape{9, 3584},
                         Shape{9, 4096}, Shape{300, 257}}) {
    const size_t n = static_cast<size_t>(s.n_rows) * s.width;
    const std::vector<float> x = Values(n, seed++);
    const std::vector<float> bias = Values(s.width, seed++);
    std::vector<float> want = x;
    ASSERT_TRUE(cpu::AddBias(want.data(), bias.data(), s.n_rows, s.width).ok());

    auto d_x = Upload(x);
    auto d_bias = Upload(bias);
    ASSERT_TRUE(cuda::AddBias(d_x.get(), d_bias.get(), s.n_rows, s.width, stream()).ok());
    ExpectSameBitsAnyNan(d_x.Download(stream()), want, absl::StrFormat("n_rows=%d width=%d", s.n_rows, s.width));
  }
}

TEST_F(AddCudaTest, RejectsBadArgumentsWithoutLaunching) {
  auto a = Upload(std::vector<float>{1, 2, 3, 4});
  auto b = Upload(std::vector<float>{5, 6, 7, 8});
  auto out = Output<float>(4);
  struct AddCase {
    const float* a;
    const float* b;
    float* out;
    int64_t n;
    std::string needle;
  };
  for (const AddCase& c : {AddCase{nullptr, b.get(), out.get(), 4, "a is null"},
                           AddCase{a.get(), nullptr, out.get(), 4, "b is null"},
                           AddCase{a.get(), b.get(), nullptr, 4, "out is null"},
                           AddCase{a.get(), b.get(), out.get(), 0, "n (0)"},
                           AddCase{a.get(), b.get(), out.get(), -4, "n (-4)"}}) {
    testing::ExpectInvalidArgument(cuda::Add(c.a, c.b, c.out, c.n, stream()), "Add", c.needle);
  }
  for (float f : out.Download(stream())) EXPECT_TRUE(std::isnan(f)) << "a rejected Add wrote to out";

  auto x = Output<float>(4);
  struct AddBiasCase {
    float* x;
    const float* bias;
    int n_rows, width;
    std::string needle;
  };
  for (const AddBiasCase& c : {AddBiasCase{nullptr, b.get(), 2, 2, "x is null"},
                               AddBiasCase{x.get(), nullptr, 2, 2, "bias is null"},
                               AddBiasCase{x.get(), b.get(), 0, 2, "n_rows (0)"},
                               AddBiasCase{x.get(), b.get(), 2, -1, "width (-1)"}}) {
    testing::ExpectInvalidArgument(cuda::AddBias(c.x, c.bias, c.n_rows, c.width, stream()), "AddBias", c.needle);
  }
  for (float f : x.Download(stream())) EXPECT_TRUE(std::isnan(f)) << "a rejected AddBias wrote to x";
}

}  // namespace
}  // namespace octo
