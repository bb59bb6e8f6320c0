// cpu::Add and cpu::AddBias: one float addition per element, in place too.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

using testing::RandomVector;

TEST(AddCpuTest, AddsElementWiseAndInPlace) {
  const std::vector<float> a = RandomVector(1001, -3, 3, 1);
  const std::vector<float> b = RandomVector(1001, -3, 3, 2);
  std::vector<float> out(a.size());
  ASSERT_TRUE(cpu::Add(a.data(), b.data(), out.data(), static_cast<int64_t>(a.size())).ok());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(out[i], a[i] + b[i]) << i;
  std::vector<float> in_place = a;
  ASSERT_TRUE(cpu::Add(in_place.data(), b.data(), in_place.data(), static_cast<int64_t>(a.size())).ok());
  EXPECT_EQ(in_place, out);
  in_place = b;
  ASSERT_TRUE(cpu::Add(a.data(), in_place.data(), in_place.data(), static_cast<int64_t>(a.size())).ok());
  EXPECT_EQ(in_place, out);
}

TEST(AddCpuTest, AddBiasAddsTheBiasToEveryRow) {
  const int n_rows = 3, width = 37;
  std::vector<float> x = RandomVector(n_rows * width, -1, 1, 3);
  const std::vector<float> bias = RandomVector(width, -1, 1, 4);
  const std::vector<float> before = x;
  ASSERT_TRUE(cpu::AddBias(x.data(), bias.data(), n_rows, width).ok());
  for (int r = 0; r < n_rows; ++r) {
    for (int i = 0; i < width; ++i) EXPECT_EQ(x[r * width + i], before[r * width + i] + bias[i]);
  }
}

TEST(AddCpuTest, RejectsBadArguments) {
  float a[2] = {1, 2}, b[2] = {3, 4}, out[2] = {-7, -7};
  EXPECT_EQ(cpu::Add(nullptr, b, out, 2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu::Add(a, nullptr, out, 2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu::Add(a, b, nullptr, 2).code(), absl::StatusCode::kInvalidArgument);
  const absl::Status zero = cpu::Add(a, b, out, 0);
  EXPECT_EQ(zero.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(zero.message().find("Add: n (0)"), std::string::npos) << zero;
  EXPECT_EQ(cpu::AddBias(nullptr, b, 1, 2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu::AddBias(a, nullptr, 1, 2).code(), absl::StatusCode::kInvalidArgument);
  const absl::Status width = cpu::AddBias(a, b, 1, 0);
  EXPECT_NE(width.message().find("AddBias: n_rows (1) and width (0)"), std::string::npos) << width;
  EXPECT_EQ(out[0], -7);
  EXPECT_EQ(out[1], -7);
}

}  // namespace
}  // namespace octo
