// Softmax: the CPU version against a double-precision reference, and the
// conventions it shares with ggml (max subtraction, the multiply by the
// reciprocal of a double sum).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "kernels/ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

using testing::RandomVector;

// Per element: |got - want| <= kRelTol * want. Inputs lie in [-8, 8], so
// x - max lies in [-16, 0] and is rounded once (at most 2^-21 = 4.8e-7
// absolute, so as much relative after exp); expf adds about 1 ulp (6e-8), the
// float reciprocal and the product one rounding each: under 7e-7 in all.
// Measured 6.4e-7 at worst (100 seeds). 2e-6 leaves room and catches a float
// sum over thousands of elements or a wrong max.
constexpr double kRelTol = 2e-6;

std::vector<double> ReferenceSoftmax(const std::vector<float>& x, int n_rows, int n) {
  std::vector<double> out(x.size());
  for (int r = 0; r < n_rows; ++r) {
    const float* row = x.data() + static_cast<size_t>(r) * n;
    double max = row[0];
    for (int i = 1; i < n; ++i) max = std::max(max, static_cast<double>(row[i]));
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += std::exp(row[i] - max);
    for (int i = 0; i < n; ++i) out[static_cast<size_t>(r) * n + i] = std::exp(row[i] - max) / sum;
  }
  return out;
}

TEST(SoftmaxCpuTest, MatchesDoublePrecisionReference) {
  struct Shape {
    int n_rows, n;
  };
  // n: 1, odd, expert counts (8, 60, 128), a context length, a vocabulary.
  const Shape shapes[] = {{1, 1},  {3, 7},   {5, 8},    {2, 33},
                          {4, 60}, {3, 128}, {2, 4097}, {1, 32000}};
  uint32_t seed = 1;
  for (const Shape& s : shapes) {
    std::vector<float> x = RandomVector(static_cast<size_t>(s.n_rows) * s.n, -8, 8, seed++);
    const std::vector<double> want = ReferenceSoftmax(x, s.n_rows, s.n);
    ASSERT_TRUE(cpu::Softmax(x.data(), s.n_rows, s.n).ok());
    size_t misses = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      if (!(std::abs(x[k] - want[k]) <= kRelTol * want[k])) {
        if (misses++ == 0) {
          ADD_FAILURE() << "n_rows=" << s.n_rows << " n=" << s.n << " element " << k << ": got "
                        << x[k] << ", want " << want[k];
        }
      }
    }
    EXPECT_EQ(misses, 0u);
  }
}

// Without the max subtraction exp(1000) overflows to inf and the row is NaN.
// With it the row is exactly the row {0, 1, 2}: 1000 - 1002 and 1001 - 1002
// are exact in float.
TEST(SoftmaxCpuTest, SubtractsTheRowMax) {
  float big[3] = {1000, 1001, 1002};
  float small[3] = {0, 1, 2};
  ASSERT_TRUE(cpu::Softmax(big, 1, 3).ok());
  ASSERT_TRUE(cpu::Softmax(small, 1, 3).ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(big[i], small[i]) << "index " << i;
  EXPECT_NEAR(small[2], std::exp(2.0) / (1 + std::exp(1.0) + std::exp(2.0)), 1e-6);
}

// ggml scales by (float)(1.0 / sum) instead of dividing by the sum. The row
// below is one where the two differ in the last bit, so this pins the choice.
TEST(SoftmaxCpuTest, MultipliesByTheReciprocalOfTheSum) {
  const std::vector<float> row = {0.0f, -0.5f, -1.25f, -2.0f, -0.75f, -3.0f, -0.1f};
  const int n = static_cast<int>(row.size());
  double sum = 0;
  for (float v : row) sum += static_cast<double>(std::exp(v));  // max is 0
  const float inv_sum = static_cast<float>(1.0 / sum);
  int differs = 0;
  for (float v : row) differs += (std::exp(v) * inv_sum != static_cast<float>(std::exp(v) / sum));
  ASSERT_GT(differs, 0) << "this row no longer tells the two conventions apart";

  std::vector<float> x = row;
  ASSERT_TRUE(cpu::Softmax(x.data(), 1, n).ok());
  for (int i = 0; i < n; ++i) EXPECT_EQ(x[i], std::exp(row[i]) * inv_sum) << "index " << i;
}

// -inf (a masked entry) gets weight exactly 0; the rest are unaffected.
TEST(SoftmaxCpuTest, MinusInfinityGetsZeroWeight) {
  const float inf = std::numeric_limits<float>::infinity();
  float x[4] = {-inf, 0.5f, -inf, 0.5f};
  ASSERT_TRUE(cpu::Softmax(x, 1, 4).ok());
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_EQ(x[2], 0.0f);
  EXPECT_EQ(x[1], 0.5f);
  EXPECT_EQ(x[3], 0.5f);
}

TEST(SoftmaxCpuTest, RowsAreIndependent) {
  std::vector<float> two_rows = RandomVector(2 * 50, -3, 3, 9);
  std::vector<float> second(two_rows.begin() + 50, two_rows.end());
  ASSERT_TRUE(cpu::Softmax(two_rows.data(), 2, 50).ok());
  ASSERT_TRUE(cpu::Softmax(second.data(), 1, 50).ok());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(two_rows[50 + i], second[i]) << "index " << i;
}

TEST(SoftmaxCpuTest, RejectsBadArguments) {
  float x[4] = {1, 2, 3, 4};
  struct Case {
    float* x;
    int n_rows, n;
    const char* names;  // the argument the message must name
  };
  const Case cases[] = {
      {nullptr, 1, 4, "x is null"}, {x, 0, 4, "n_rows (0)"}, {x, -1, 4, "n_rows (-1)"},
      {x, 1, 0, "n (0)"},           {x, 1, -4, "n (-4)"},
  };
  for (const Case& c : cases) {
    const absl::Status status = cpu::Softmax(c.x, c.n_rows, c.n);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find("Softmax"), std::string::npos) << status;
    EXPECT_NE(status.message().find(c.names), std::string::npos) << status;
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(x[i], i + 1.0f) << "a rejected call wrote to x";
}

}  // namespace
}  // namespace octo
