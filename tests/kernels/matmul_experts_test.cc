// cpu::MatMulExperts: every (token, choice) gets exactly what cpu::MatMul
// gives for it alone, with x shared by a token's choices or one row each.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/ops.h"
#include "tests/kernels/quant_test_util.h"

namespace octo {
namespace {

using testing::RandomActivations;
using testing::RandomWeights;

WeightMatrix Expert(const WeightMatrix& w, int n_experts, int e) {
  const int64_t rows = w.rows / n_experts;
  const int64_t row_bytes = w.cols / GgmlTypeInfoOf(w.type).block_size * GgmlTypeInfoOf(w.type).type_size;
  return WeightMatrix{w.type, static_cast<const uint8_t*>(w.data) + e * rows * row_bytes, rows, w.cols};
}

TEST(MatMulExpertsCpuTest, EveryChoiceIsMatMulOfItsExpertBitForBit) {
  cpu::ThreadPool pool(3);
  const cpu::Exec exec{&pool, cpu::Simd::kPortable};
  const int n_experts = 6, rows = 40, cols = 256, n_tokens = 5, k = 2;
  const std::vector<int32_t> ids = {0, 5, 5, 2, 3, 0, 5, 1, 2, 3};  // (n_tokens, k); expert 4 unused
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0, GgmlType::kF16, GgmlType::kIQ2_XXS, GgmlType::kIQ3_S,
                        GgmlType::kIQ1_M, GgmlType::kTQ1_0, GgmlType::kTQ2_0, GgmlType::kMXFP4}) {
    const std::vector<uint8_t> bytes = RandomWeights(type, n_experts * rows, cols, 3);
    const WeightMatrix w{type, bytes.data(), n_experts * rows, cols};
    for (bool per_choice : {false, true}) {
      const std::string what = absl::StrFormat("%s, x per choice %d", std::string(GgmlTypeInfoOf(type).name), per_choice);
      const std::vector<float> x = RandomActivations((per_choice ? n_tokens * k : n_tokens) * cols, 4);
      std::vector<float> out(static_cast<size_t>(n_tokens) * k * rows, -1.0f);
      const MatMulExpertsParams p{n_experts, k, n_tokens, per_choice};
      ASSERT_TRUE(cpu::MatMulExperts(w, ids.data(), x.data(), out.data(), p, exec).ok()) << what;
      for (int i = 0; i < n_tokens * k; ++i) {
        std::vector<float> want(rows);
        const float* x_row = &x[static_cast<size_t>(per_choice ? i : i / k) * cols];
        ASSERT_TRUE(cpu::MatMul(Expert(w, n_experts, ids[i]), x_row, want.data(), 1, exec).ok());
        EXPECT_EQ(0, std::memcmp(want.data(), &out[static_cast<size_t>(i) * rows], rows * sizeof(float)))
            << what << ": token " << i / k << " choice " << i % k;
      }
    }
  }
}

// A format-2 layer file pads each expert's block to 4 KiB: with
// expert_stride the same experts give the same bits as packed.
TEST(MatMulExpertsCpuTest, StridedExpertsGiveThePackedBits) {
  cpu::ThreadPool pool(2);
  const cpu::Exec exec{&pool, cpu::Simd::kPortable};
  const int n_experts = 4, rows = 24, cols = 256, n_tokens = 3, k = 2;
  const std::vector<int32_t> ids = {3, 1, 0, 3, 2, 1};
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0}) {
    const std::vector<uint8_t> packed = RandomWeights(type, n_experts * rows, cols, 5);
    const int64_t packed_bytes = static_cast<int64_t>(packed.size()) / n_experts;
    const int64_t stride = (packed_bytes + 4095) / 4096 * 4096 + 4096;
    std::vector<uint8_t> strided(static_cast<size_t>(stride) * n_experts, 0xA5);  // padding: garbage
    for (int e = 0; e < n_experts; ++e) std::memcpy(&strided[e * stride], &packed[e * packed_bytes], packed_bytes);
    const std::vector<float> x = RandomActivations(n_tokens * cols, 6);
    std::vector<float> want(static_cast<size_t>(n_tokens) * k * rows), got(want.size());
    const MatMulExpertsParams p{n_experts, k, n_tokens, false};
    ASSERT_TRUE(cpu::MatMulExperts({type, packed.data(), n_experts * rows, cols}, ids.data(), x.data(), want.data(),
                                   p, exec)
                    .ok());
    ASSERT_TRUE(cpu::MatMulExperts({type, strided.data(), n_experts * rows, cols, stride}, ids.data(), x.data(),
                                   got.data(), p, exec)
                    .ok());
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << GgmlTypeInfoOf(type).name;
    const WeightMatrix short_stride{type, strided.data(), n_experts * rows, cols, packed_bytes - 1};
    const absl::Status status = cpu::MatMulExperts(short_stride, ids.data(), x.data(), got.data(), p, exec);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("expert_stride"), std::string::npos) << status;
  }
}

TEST(MatMulExpertsCpuTest, RejectsBadArguments) {
  const std::vector<uint8_t> bytes = RandomWeights(GgmlType::kQ8_0, 8, 32, 1);
  const WeightMatrix w{GgmlType::kQ8_0, bytes.data(), 8, 32};
  const std::vector<float> x(64, 1.0f);
  std::vector<float> out(64, -7.0f);
  const int32_t ids[] = {0, 3};
  const cpu::Exec exec;
  struct Case {
    MatMulExpertsParams p;
    const int32_t* ids;
    std::string needle;
  };
  const int32_t bad_ids[] = {0, 4};
  for (const Case& c : {Case{{3, 1, 2, false}, ids, "n_experts (3) must be positive and divide w.rows (8)"},
                        Case{{4, 0, 2, false}, ids, "k (0) must be in [1, n_experts (4)]"},
                        Case{{4, 1, 0, false}, ids, "n_tokens (0)"},
                        Case{{4, 1, 2, false}, nullptr, "expert_ids is null"},
                        Case{{4, 1, 2, false}, bad_ids, "expert_ids[1][0] (4) is not in [0, 4)"}}) {
    const absl::Status status = cpu::MatMulExperts(w, c.ids, x.data(), out.data(), c.p, exec);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.needle;
    EXPECT_NE(status.message().find("MatMulExperts: " + c.needle), std::string::npos) << status;
  }
  for (float f : out) EXPECT_EQ(f, -7.0f) << "a rejected call wrote to out";
}

}  // namespace
}  // namespace octo
