// MatMulGroup: several matrices over one x in one pass must give exactly the
// bits separate MatMul calls give (the forward pass runs q/k/v and gate/up
// this way), whatever the mix of types, the batch and the pool.
#include <cstring>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/ops.h"
#include "tests/kernels/quant_test_util.h"

namespace octo {
namespace {

struct Matrix {
  std::vector<uint8_t> bytes;
  WeightMatrix view;
};

Matrix MakeMatrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m;
  m.bytes = testing::RandomWeights(type, rows, cols, seed);
  m.view = WeightMatrix{.type = type, .data = m.bytes.data(), .rows = rows, .cols = cols};
  return m;
}

TEST(MatMulGroupTest, SameBitsAsSeparateCallsForMixedTypes) {
  constexpr int64_t kCols = 512;
  // A Q4_K_M-style layer: q and k in Q4_K, v in Q6_K; plus an F32 and a Q8_0
  // matrix so three activation encodings are in play at once.
  std::vector<Matrix> mats;
  mats.push_back(MakeMatrix(GgmlType::kQ4_K, 96, kCols, 1));
  mats.push_back(MakeMatrix(GgmlType::kQ6_K, 32, kCols, 2));
  mats.push_back(MakeMatrix(GgmlType::kF32, 7, kCols, 3));
  mats.push_back(MakeMatrix(GgmlType::kQ8_0, 40, kCols, 4));
  std::vector<WeightMatrix> views;
  for (const Matrix& m : mats) views.push_back(m.view);

  cpu::ThreadPool pool(3);
  for (cpu::Simd simd : {cpu::Simd::kPortable, cpu::DetectSimd()}) {
    for (int n_tokens : {1, 5}) {
      const std::vector<float> x = testing::RandomActivations(n_tokens * kCols, 9);
      const cpu::Exec exec{.pool = &pool, .simd = simd};
      std::vector<std::vector<float>> separate(mats.size()), grouped(mats.size());
      std::vector<float*> outs;
      for (size_t i = 0; i < mats.size(); ++i) {
        separate[i].resize(n_tokens * mats[i].view.rows);
        grouped[i].assign(n_tokens * mats[i].view.rows, -1.0f);
        ASSERT_TRUE(cpu::MatMul(mats[i].view, x.data(), separate[i].data(), n_tokens, exec).ok());
        outs.push_back(grouped[i].data());
      }
      ASSERT_TRUE(cpu::MatMulGroup(views, x.data(), outs, n_tokens, exec).ok());
      for (size_t i = 0; i < mats.size(); ++i) {
        EXPECT_EQ(0, std::memcmp(separate[i].data(), grouped[i].data(), separate[i].size() * sizeof(float)))
            << "matrix " << i << " n_tokens " << n_tokens << " simd " << cpu::SimdName(simd);
      }
    }
  }
}

TEST(MatMulGroupTest, BadGroupsAreRefusedAndNothingIsWritten) {
  Matrix a = MakeMatrix(GgmlType::kQ8_0, 8, 256, 1);
  Matrix b = MakeMatrix(GgmlType::kQ8_0, 8, 512, 2);
  const std::vector<float> x = testing::RandomActivations(512, 3);
  std::vector<float> out_a(8, -1.0f), out_b(8, -1.0f);
  float* const outs[] = {out_a.data(), out_b.data()};
  const WeightMatrix different_cols[] = {a.view, b.view};
  absl::Status s = cpu::MatMulGroup(different_cols, x.data(), outs, 1, cpu::Exec{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("columns"), std::string::npos) << s;
  EXPECT_EQ(out_a, std::vector<float>(8, -1.0f));

  const WeightMatrix one[] = {a.view};
  s = cpu::MatMulGroup(one, x.data(), outs, 1, cpu::Exec{});  // two outputs for one matrix
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  const WeightMatrix too_many[] = {a.view, a.view, a.view, a.view, a.view};
  float* const five[] = {out_a.data(), out_a.data(), out_a.data(), out_a.data(), out_a.data()};
  s = cpu::MatMulGroup(too_many, x.data(), five, 1, cpu::Exec{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out_a, std::vector<float>(8, -1.0f));
}

}  // namespace
}  // namespace octo
