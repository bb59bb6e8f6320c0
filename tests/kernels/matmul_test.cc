// MatMul: every weight type against a double-precision reference, AVX2 against
// portable, bit-identical results for any batch size and pool size, and the
// argument checks.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
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
using testing::RandomActivations;
using testing::RandomWeights;

// Tolerance, per output: |got - reference| <= kTolUlps * 2^-24 * S, where
// S = sum_i |w_i * x_i| over the dequantized weights and activations.
//
// The reference is the exact dot product (in double) of the values the two
// encodings stand for (testing::ReferenceDot). MatMul computes the same
// integers exactly and differs only by float roundings, each of relative
// size <= 2^-24 on a term bounded by S: the product of the two block scales,
// the int -> float conversion of a block's integer sum, the float sum over
// the blocks (16 at cols 512, plus the mins' sum for K-quants), and
// DequantizeRows' own rounding of each weight (on the reference's side). For
// the float types the sum runs over 8 (portable) or 32 (AVX2) interleaved
// partial sums, then a pairwise reduction. The worst case adds up to about 70
// such roundings; random ones add like a random walk, and the largest error
// measured over every type, both paths and all these inputs is 1.7 (F32,
// portable; 1.4 for the quantized types). 16 leaves ~10x room and still
// catches anything real: one element taken wrong moves a result by about
// S / cols = S / 512, 2^11 times the tolerance.
constexpr double kTolUlps = 16;

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

struct Problem {
  GgmlType type;
  int64_t rows;
  int64_t cols;
  int n_tokens;
  std::vector<uint8_t> w_bytes;
  std::vector<float> x;  // (n_tokens, cols)

  WeightMatrix w() const { return WeightMatrix{type, w_bytes.data(), rows, cols}; }
};

Problem MakeProblem(GgmlType type, int64_t rows, int64_t cols, int n_tokens, uint32_t seed) {
  return Problem{type, rows, cols, n_tokens, RandomWeights(type, rows, cols, seed),
                 RandomActivations(n_tokens * cols, seed + 1)};
}

std::vector<float> RunMatMul(const Problem& p, const Exec& exec) {
  std::vector<float> out(static_cast<size_t>(p.n_tokens * p.rows), -1.0f);
  const absl::Status status = cpu::MatMul(p.w(), p.x.data(), out.data(), p.n_tokens, exec);
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// The exact dot products of what w and the encoded x stand for (reference)
// and the matching S (see kTolUlps).
struct Reference {
  std::vector<double> value;
  std::vector<double> abs_sum;
};

Reference ComputeReference(const Problem& p) {
  const cpu::TypeKernels* kernels = cpu::FindTypeKernels(p.type);
  const int64_t row_bytes = static_cast<int64_t>(RowBytes(p.type, p.cols));
  std::vector<float> w(static_cast<size_t>(p.rows * p.cols));
  EXPECT_TRUE(cpu::DequantizeRows(p.w(), 0, p.rows, w.data()).ok());
  std::vector<uint8_t> enc(static_cast<size_t>(cpu::ActRowBytes(kernels->act, p.cols)));
  std::vector<float> x_hat(static_cast<size_t>(p.cols));
  Reference ref{std::vector<double>(p.n_tokens * p.rows), std::vector<double>(p.n_tokens * p.rows)};
  for (int t = 0; t < p.n_tokens; ++t) {
    cpu::QuantizeActivationRow(kernels->act, &p.x[t * p.cols], p.cols, enc.data(), Simd::kPortable);
    cpu::DequantizeActivationRow(kernels->act, enc.data(), p.cols, x_hat.data());
    for (int64_t r = 0; r < p.rows; ++r) {
      const testing::ExactDot dot = testing::ReferenceDot(p.type, &w[r * p.cols], &p.w_bytes[r * row_bytes],
                                                          kernels->act, enc.data(), x_hat.data(), p.cols);
      ref.value[t * p.rows + r] = dot.value;
      ref.abs_sum[t * p.rows + r] = dot.abs_sum;
    }
  }
  return ref;
}

// Largest |got - want| in units of 2^-24 * S.
double MaxErrorUlps(const std::vector<float>& got, const Reference& ref) {
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double scale = std::ldexp(ref.abs_sum[i], -24);
    if (scale == 0.0) {
      EXPECT_EQ(got[i], 0.0f) << "output " << i;
      continue;
    }
    worst = std::max(worst, std::fabs(got[i] - ref.value[i]) / scale);
  }
  return worst;
}

bool HaveAvx2() { return cpu::DetectSimd() == Simd::kAvx2; }

class MatMulTypeTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(MatMulTypeTest, PortableMatchesReference) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const Problem p = MakeProblem(GetParam(), 37, 512, 3, seed);
    const double err = MaxErrorUlps(RunMatMul(p, Exec{nullptr, Simd::kPortable}), ComputeReference(p));
    EXPECT_LE(err, kTolUlps) << "seed " << seed;
  }
}

TEST_P(MatMulTypeTest, Avx2MatchesReference) {
  if (!HaveAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  for (uint32_t seed : {1u, 2u, 3u}) {
    const Problem p = MakeProblem(GetParam(), 37, 512, 3, seed);
    const double err = MaxErrorUlps(RunMatMul(p, Exec{nullptr, Simd::kAvx2}), ComputeReference(p));
    EXPECT_LE(err, kTolUlps) << "seed " << seed;
  }
}

// The smallest legal width (one block; 32 for the float types, which have no
// blocks, to cover their scalar tails with 33) and a wide row.
TEST_P(MatMulTypeTest, OneBlockAndWideRows) {
  const int64_t block = GgmlTypeInfoOf(GetParam()).block_size;
  const int64_t narrow = block == 1 ? 33 : block;
  for (int64_t cols : {narrow, int64_t{4096}}) {
    const Problem p = MakeProblem(GetParam(), 5, cols, 2, 7);
    const Reference ref = ComputeReference(p);
    EXPECT_LE(MaxErrorUlps(RunMatMul(p, Exec{nullptr, Simd::kPortable}), ref), kTolUlps) << "cols " << cols;
    if (HaveAvx2()) {
      EXPECT_LE(MaxErrorUlps(RunMatMul(p, Exec{nullptr, Simd::kAvx2}), ref), kTolUlps) << "cols " << cols;
    }
  }
}

// Portable and AVX2 differ only in float summation order: within the same
// tolerance of each other (measured: 1.5 at most).
TEST_P(MatMulTypeTest, Avx2MatchesPortable) {
  if (!HaveAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  const Problem p = MakeProblem(GetParam(), 64, 1024, 2, 11);
  const Reference ref = ComputeReference(p);
  const std::vector<float> portable = RunMatMul(p, Exec{nullptr, Simd::kPortable});
  const std::vector<float> avx2 = RunMatMul(p, Exec{nullptr, Simd::kAvx2});
  for (size_t i = 0; i < portable.size(); ++i) {
    EXPECT_LE(std::fabs(portable[i] - avx2[i]), kTolUlps * std::ldexp(ref.abs_sum[i], -24)) << "output " << i;
  }
}

// out[t][r] is the same bits whatever the batch and the pool: a token alone,
// the same token inside a batch of 7, pools of 1, 2 and 3 threads.
TEST_P(MatMulTypeTest, SameBitsForAnyBatchAndPool) {
  const Problem batch = MakeProblem(GetParam(), 67, 512, 7, 21);
  cpu::ThreadPool pool2(2), pool3(3);
  for (Simd simd : {Simd::kPortable, Simd::kAvx2}) {
    if (simd == Simd::kAvx2 && !HaveAvx2()) continue;
    const std::vector<float> base = RunMatMul(batch, Exec{nullptr, simd});
    EXPECT_EQ(base, RunMatMul(batch, Exec{&pool2, simd})) << cpu::SimdName(simd);
    EXPECT_EQ(base, RunMatMul(batch, Exec{&pool3, simd})) << cpu::SimdName(simd);
    for (int t = 0; t < batch.n_tokens; ++t) {
      Problem alone = batch;
      alone.n_tokens = 1;
      alone.x.assign(batch.x.begin() + t * batch.cols, batch.x.begin() + (t + 1) * batch.cols);
      const std::vector<float> want(base.begin() + t * batch.rows, base.begin() + (t + 1) * batch.rows);
      EXPECT_EQ(want, RunMatMul(alone, Exec{nullptr, simd})) << cpu::SimdName(simd) << " token " << t;
      EXPECT_EQ(want, RunMatMul(alone, Exec{&pool3, simd})) << cpu::SimdName(simd) << " token " << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatMulTypeTest, ::testing::ValuesIn(kAllTypes), TypeName);

// A batch large enough that the row chunks are smaller than the matrix and
// the pool has many tasks: still the same bits as token by token.
TEST(MatMulTest, LargeBatchSameBitsAsSingleTokens) {
  const Problem batch = MakeProblem(GgmlType::kQ4_K, 300, 2048, 5, 31);
  cpu::ThreadPool pool(3);
  const Simd simd = cpu::DetectSimd();
  const std::vector<float> got = RunMatMul(batch, Exec{&pool, simd});
  for (int t = 0; t < batch.n_tokens; ++t) {
    Problem alone = batch;
    alone.n_tokens = 1;
    alone.x.assign(batch.x.begin() + t * batch.cols, batch.x.begin() + (t + 1) * batch.cols);
    const std::vector<float> want(got.begin() + t * batch.rows, got.begin() + (t + 1) * batch.rows);
    EXPECT_EQ(want, RunMatMul(alone, Exec{nullptr, simd})) << "token " << t;
  }
}

// --- Argument checks: INVALID_ARGUMENT naming the argument, out untouched ---

void ExpectRejected(const WeightMatrix& w, const float* x, float* out, int n_tokens, const std::string& needle,
                    const std::vector<float>& out_buffer_before, const std::vector<float>& out_buffer) {
  const absl::Status status = cpu::MatMul(w, x, out, n_tokens, Exec{});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(std::string(status.message()).find(needle), std::string::npos) << status;
  EXPECT_EQ(out_buffer, out_buffer_before) << needle;
}

TEST(MatMulTest, RejectsBadArguments) {
  const std::vector<uint8_t> bytes = RandomWeights(GgmlType::kQ4_K, 4, 512, 5);
  const std::vector<float> x = RandomActivations(2 * 512, 6);
  std::vector<float> out(8, 42.0f);
  const std::vector<float> before = out;
  const WeightMatrix good{GgmlType::kQ4_K, bytes.data(), 4, 512};

  ExpectRejected(WeightMatrix{GgmlType::kQ4_K, bytes.data(), 4, 300}, x.data(), out.data(), 2, "w.cols (300)",
                 before, out);
  ExpectRejected(WeightMatrix{GgmlType::kQ4_K, bytes.data(), 4, 0}, x.data(), out.data(), 2, "w.cols (0)", before,
                 out);
  ExpectRejected(WeightMatrix{GgmlType::kQ4_K, bytes.data(), 0, 512}, x.data(), out.data(), 2, "w.rows (0)",
                 before, out);
  ExpectRejected(WeightMatrix{GgmlType::kQ4_K, nullptr, 4, 512}, x.data(), out.data(), 2, "w.data", before, out);
  ExpectRejected(WeightMatrix{static_cast<GgmlType>(99), bytes.data(), 4, 512}, x.data(), out.data(), 2,
                 "w.type 99", before, out);
  ExpectRejected(good, nullptr, out.data(), 2, "x is null", before, out);
  ExpectRejected(good, x.data(), out.data(), 0, "n_tokens (0)", before, out);
  ExpectRejected(good, x.data(), out.data(), -3, "n_tokens (-3)", before, out);
  const absl::Status null_out = cpu::MatMul(good, x.data(), nullptr, 2, Exec{});
  EXPECT_EQ(null_out.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(null_out.message()).find("out is null"), std::string::npos) << null_out;

  // out overlapping x: x's buffer is left as it was.
  std::vector<float> shared = RandomActivations(2 * 512, 7);
  const std::vector<float> shared_before = shared;
  ExpectRejected(good, shared.data(), shared.data() + 100, 2, "out overlaps x", shared_before, shared);
}

}  // namespace
}  // namespace octo
