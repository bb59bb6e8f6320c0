// Batched MatMul: the tile dots (several tokens per weight row) must give
// every token exactly the bits the one-token dot gives it alone, for every
// batch size, row count and pool, since the forward pass promises a sequence
// the same logits in a batch as alone (kernels/ops.h).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/act_tile.h"
#include "kernels/cpu/quantize_activation.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/type_kernels.h"
#include "kernels/ops.h"
#include "tests/kernels/quant_test_util.h"

namespace octo {
namespace {

using cpu::Exec;
using cpu::Simd;

constexpr GgmlType kAllTypes[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ4_0,   GgmlType::kQ4_1,
    GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ2_K,   GgmlType::kQ3_K,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS,
    GgmlType::kTQ1_0, GgmlType::kTQ2_0, GgmlType::kIQ2_XXS, GgmlType::kIQ2_XS, GgmlType::kIQ2_S,
    GgmlType::kIQ3_XXS, GgmlType::kIQ3_S, GgmlType::kIQ1_S, GgmlType::kIQ1_M, GgmlType::kMXFP4,
};

std::string TypeName(const ::testing::TestParamInfo<GgmlType>& info) {
  return std::string(GgmlTypeName(info.param));
}

bool HaveAvx2() { return cpu::DetectSimd() == Simd::kAvx2; }

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<float> RunMatMul(const WeightMatrix& w, const float* x, int n_tokens, const Exec& exec) {
  std::vector<float> out(static_cast<size_t>(n_tokens * w.rows), -1.0f);
  const absl::Status status = cpu::MatMul(w, x, out.data(), n_tokens, exec);
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// Each token's outputs computed alone (n_tokens 1: the one-token dot).
std::vector<float> TokenByToken(const WeightMatrix& w, const std::vector<float>& x, int n_tokens, Simd simd) {
  std::vector<float> out;
  for (int t = 0; t < n_tokens; ++t) {
    const std::vector<float> one = RunMatMul(w, &x[t * w.cols], 1, Exec{nullptr, simd});
    out.insert(out.end(), one.begin(), one.end());
  }
  return out;
}

class MatMulBatchTest : public ::testing::TestWithParam<GgmlType> {};

// Every batch size from 1 to 17 (two full tiles and a one-token tail), an
// odd row count, pools of 1, 2 and 3 threads: each token's outputs are the
// bits it gets alone.
TEST_P(MatMulBatchTest, EveryBatchSizeGivesEachTokenItsSoloBits) {
  const int64_t block = GgmlTypeInfoOf(GetParam()).block_size;
  const int64_t cols = block == 1 ? 520 : 2 * std::max<int64_t>(block, 256);
  constexpr int64_t kRows = 37;
  constexpr int kMaxTokens = 17;
  const std::vector<uint8_t> bytes = testing::RandomWeights(GetParam(), kRows, cols, 41);
  const WeightMatrix w{GetParam(), bytes.data(), kRows, cols};
  const std::vector<float> x = testing::RandomActivations(kMaxTokens * cols, 42);
  cpu::ThreadPool pool2(2), pool3(3);
  for (Simd simd : {Simd::kPortable, Simd::kAvx2}) {
    if (simd == Simd::kAvx2 && !HaveAvx2()) continue;
    const std::vector<float> solo = TokenByToken(w, x, kMaxTokens, simd);
    for (int n_tokens = 1; n_tokens <= kMaxTokens; ++n_tokens) {
      const std::vector<float> want(solo.begin(), solo.begin() + n_tokens * kRows);
      for (cpu::ThreadPool* pool : {static_cast<cpu::ThreadPool*>(nullptr), &pool2, &pool3}) {
        EXPECT_TRUE(SameBits(want, RunMatMul(w, x.data(), n_tokens, Exec{pool, simd})))
            << cpu::SimdName(simd) << " n_tokens " << n_tokens << " pool " << (pool ? pool->size() : 0);
      }
    }
  }
}

// A prefill-sized batch over a matrix large enough that the rows are cut
// into several cache-sized chunks, each read once per tile.
TEST_P(MatMulBatchTest, PrefillBatchGivesEachTokenItsSoloBits) {
  if (!HaveAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  const int64_t cols = 4096;
  const int64_t rows = 301;
  const int n_tokens = 70;
  const std::vector<uint8_t> bytes = testing::RandomWeights(GetParam(), rows, cols, 51);
  const WeightMatrix w{GetParam(), bytes.data(), rows, cols};
  const std::vector<float> x = testing::RandomActivations(n_tokens * cols, 52);
  cpu::ThreadPool pool(2);
  EXPECT_TRUE(SameBits(TokenByToken(w, x, n_tokens, Simd::kAvx2),
                       RunMatMul(w, x.data(), n_tokens, Exec{&pool, Simd::kAvx2})));
}

// The tile dot itself, every tile size, against the one-token AVX2 dot on
// the same encoded rows, writing with a stride and nowhere else.
TEST_P(MatMulBatchTest, TileDotMatchesOneTokenDot) {
  const cpu::TypeKernels* kernels = cpu::FindTypeKernels(GetParam());
  ASSERT_NE(kernels, nullptr);
  if (!HaveAvx2() || kernels->dot_tile_avx2 == nullptr) GTEST_SKIP() << "no AVX2 tile dot";
  const int64_t block = GgmlTypeInfoOf(GetParam()).block_size;
  // An odd number of blocks (IQ4_NL's scalar last block) and a float tail.
  const int64_t cols = block == 1 ? 300 : 3 * std::max<int64_t>(block, 256) + (block == 32 ? 32 : 0);
  const std::vector<uint8_t> w = testing::RandomWeights(GetParam(), 1, cols, 61);
  const std::vector<float> x = testing::RandomActivations(cpu::kMaxTileTokens * cols, 62);
  const int64_t row_bytes = cpu::ActRowBytes(kernels->act, cols);
  std::vector<uint8_t> rows(static_cast<size_t>(cpu::kMaxTileTokens * row_bytes));
  for (int t = 0; t < cpu::kMaxTileTokens; ++t) {
    if (kernels->act == cpu::ActType::kF32) {
      std::memcpy(&rows[t * row_bytes], &x[t * cols], cols * sizeof(float));
    } else {
      cpu::QuantizeActivationRow(kernels->act, &x[t * cols], cols, &rows[t * row_bytes], Simd::kAvx2);
    }
  }
  std::vector<uint8_t> tile(static_cast<size_t>(cpu::ActTileBytes(kernels->act, cols, cpu::kMaxTileTokens)));
  constexpr int64_t kStride = 3;
  for (int n = 1; n <= cpu::kMaxTileTokens; ++n) {
    cpu::PackActTile(kernels->act, rows.data(), row_bytes, n, cols, tile.data());
    std::vector<float> got(n * kStride, -7.0f);
    kernels->dot_tile_avx2(w.data(), tile.data(), n, cols, got.data(), kStride);
    for (int t = 0; t < n; ++t) {
      const float want = kernels->dot_avx2(w.data(), &rows[t * row_bytes], cols);
      EXPECT_EQ(0, std::memcmp(&want, &got[t * kStride], sizeof(float))) << "n " << n << " token " << t;
      EXPECT_EQ(got[t * kStride + 1], -7.0f);
      EXPECT_EQ(got[t * kStride + 2], -7.0f);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatMulBatchTest, ::testing::ValuesIn(kAllTypes), TypeName);

// A group mixing encodings (Q4_K and Q6_K share Q8_K tiles, as in a
// Q4_K_M layer; Q4_1 reads Q8_1, Q8_0 its own): each matrix reads its own
// tiles, every token gets its solo bits.
TEST(MatMulBatchTest, GroupMixingEncodings) {
  constexpr int64_t kCols = 512;
  const GgmlType types[] = {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ4_1, GgmlType::kQ8_0};
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<WeightMatrix> views;
  for (int i = 0; i < 4; ++i) {
    bytes.push_back(testing::RandomWeights(types[i], 19 + 8 * i, kCols, 70 + i));
    views.push_back(WeightMatrix{types[i], bytes.back().data(), 19 + 8 * i, kCols});
  }
  const int n_tokens = 11;
  const std::vector<float> x = testing::RandomActivations(n_tokens * kCols, 80);
  cpu::ThreadPool pool(2);
  const Simd simd = cpu::DetectSimd();
  std::vector<std::vector<float>> outs(4);
  std::vector<float*> out_ptrs;
  for (int i = 0; i < 4; ++i) {
    outs[i].assign(n_tokens * views[i].rows, -1.0f);
    out_ptrs.push_back(outs[i].data());
  }
  ASSERT_TRUE(cpu::MatMulGroup(views, x.data(), out_ptrs, n_tokens, Exec{&pool, simd}).ok());
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(SameBits(TokenByToken(views[i], x, n_tokens, simd), outs[i])) << GgmlTypeName(types[i]);
  }
}

}  // namespace
}  // namespace octo
