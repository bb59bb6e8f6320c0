// cuda::Softmax against cpu::Softmax on the same rows, and the NaN rules.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
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

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// The tolerance for rows of n, relative, in units of u = 2^-24 (a float
// rounding), first order, against the CPU (double sum, nearly exact):
//   e_i = expf(x_i - max): the GPU's expf is within 2 ulp (CUDA's documented
//     bound), 2^-22 = 4u relative, and x_i - max is the same float on both;
//   the sum: each thread adds its ceil(n / 1024) values in order, then two
//     5-level shuffle trees: at most ceil(n / 1024) + 10 roundings of a
//     positive sum (each <= u of the whole), plus its e_i's 4u;
//   1 / sum: one rounding on each side (2u); e_i * inv: one on each side (2u).
// Total (12 + ceil(n / 1024) + 10) u: 1.4e-6 for n <= 1024, 1.8e-6 for 8192,
// 3.2e-6 for 32000. The absolute part covers e_i below fp32's normal range
// (x_i - max < -87), where ulps are absolute (2^-149).
// In the executor expf is the host's, the CPU's own, so only the sum's order
// differs (measured worst, all shapes of MatchesCpu: 2.2e-7 relative).
Tolerance SoftmaxTolerance(int n) {
  const int roundings = 12 + (n + 1023) / 1024 + 10;
  return Tolerance{roundings * 0x1p-24, 1e-38};
}

class SoftmaxCudaTest : public testing::CudaOpTest {
 protected:
  std::vector<float> Run(const std::vector<float>& x, int n_rows, int n) {
    auto d_x = Upload(x);
    const absl::Status launched = cuda::Softmax(d_x.get(), n_rows, n, stream());
    EXPECT_TRUE(launched.ok()) << launched;
    return d_x.Download(stream());
  }
  std::vector<float> Want(std::vector<float> x, int n_rows, int n) {
    EXPECT_TRUE(cpu::Softmax(x.data(), n_rows, n).ok());
    return x;
  }
};

// n: 1, under a warp, one warp and a bit, not multiples of 32, one
// 1024-thread block and a bit, attention rows (4096, 8192), a vocabulary
// (32000); 1, 9 and 64 rows. Values in [-10, 10): probabilities from ~1 down
// to e^-20 of the max; [-60, 60) reaches below fp32's normal range.
TEST_F(SoftmaxCudaTest, MatchesCpu) {
  struct Shape {
    int n_rows, n;
    float spread;
  };
  uint32_t seed = 1;
  for (const Shape& s : {Shape{1, 1, 10}, Shape{3, 7, 10}, Shape{9, 31, 10}, Shape{4, 32, 10}, Shape{4, 33, 10},
                         Shape{64, 100, 10}, Shape{5, 1000, 10}, Shape{3, 1025, 60}, Shape{9, 4096, 10},
                         Shape{2, 8192, 60}, Shape{1, 32000, 10}}) {
    const std::vector<float> x = RandomVector(static_cast<size_t>(s.n_rows) * s.n, -s.spread, s.spread, seed++);
    ExpectClose(Run(x, s.n_rows, s.n), Want(x, s.n_rows, s.n), s.n, SoftmaxTolerance(s.n),
                absl::StrFormat("n_rows=%d n=%d", s.n_rows, s.n));
  }
}

// The rows of ops.h's rules, one per row of a call: finite with -inf
// entries (masked: exactly 0, the rest as without them), equal values
// (exactly 1 / n each on both sides: e_i = 1, the sum n is exact), a NaN,
// +inf, only -inf, -inf and NaN. The last four come out all NaN on both
// sides.
TEST_F(SoftmaxCudaTest, FollowsTheCpusRulesForInfAndNan) {
  const int n = 40;
  std::vector<std::vector<float>> rows(6, RandomVector(n, -3.0f, 3.0f, 77));
  for (int i = 0; i < n; i += 3) rows[0][i] = -kInf;
  rows[1].assign(n, 2.5f);
  rows[2][17] = kNan;
  rows[3][39] = kInf;
  rows[4].assign(n, -kInf);
  rows[5].assign(n, -kInf);
  rows[5][0] = kNan;
  std::vector<float> x;
  for (const std::vector<float>& row : rows) x.insert(x.end(), row.begin(), row.end());
  const int n_rows = static_cast<int>(rows.size());

  const std::vector<float> got = Run(x, n_rows, n);
  const std::vector<float> want = Want(x, n_rows, n);
  ExpectClose(got, want, n, SoftmaxTolerance(n), "rows with inf and NaN");
  for (int i = 0; i < n; i += 3) EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), 0u) << "masked entry " << i;
  for (int i = 0; i < n; ++i) EXPECT_EQ(got[n + i], 1.0f / n) << "uniform row, index " << i;
  for (int r = 2; r < n_rows; ++r) {
    for (int i = 0; i < n; ++i) {
      EXPECT_TRUE(std::isnan(got[static_cast<size_t>(r) * n + i])) << "row " << r << " index " << i;
      EXPECT_TRUE(std::isnan(want[static_cast<size_t>(r) * n + i])) << "row " << r << " index " << i;
    }
  }
}

// A row's result does not depend on the other rows of the call: the same
// bits alone as in a batch of 9.
TEST_F(SoftmaxCudaTest, RowsAreIndependent) {
  const int n_rows = 9, n = 3000;
  const std::vector<float> x = RandomVector(static_cast<size_t>(n_rows) * n, -10.0f, 10.0f, 5);
  const std::vector<float> batch = Run(x, n_rows, n);
  for (int r = 0; r < n_rows; r += 4) {
    const std::vector<float> row(x.begin() + static_cast<size_t>(r) * n, x.begin() + static_cast<size_t>(r + 1) * n);
    const std::vector<float> alone = Run(row, 1, n);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(alone[i]), std::bit_cast<uint32_t>(batch[static_cast<size_t>(r) * n + i]))
          << "row " << r << " index " << i;
    }
  }
}

TEST_F(SoftmaxCudaTest, RejectsBadArgumentsWithoutLaunching) {
  const std::vector<float> before = {1, 2, 3, 4};
  auto x = Upload(before);
  struct Case {
    float* x;
    int n_rows, n;
    std::string needle;
  };
  for (const Case& c : {Case{nullptr, 2, 2, "x is null"}, Case{x.get(), 0, 2, "n_rows (0)"},
                        Case{x.get(), 2, -3, "n (-3)"}}) {
    testing::ExpectInvalidArgument(cuda::Softmax(c.x, c.n_rows, c.n, stream()), "Softmax", c.needle);
  }
  EXPECT_EQ(x.Download(stream()), before) << "a rejected call wrote to x";
}

}  // namespace
}  // namespace octo
