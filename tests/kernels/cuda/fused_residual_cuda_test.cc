// cuda::MatMulAdd (fused.h): a decode MatMul that also adds its output into
// the residual stream (wo's and down's, before the next norm) leaves what
// MatMul then Add leave -- the product and the residual, bit for bit -- in
// one launch fewer; every kind of decode kernel (a staged type, a 16-byte
// unit type, a float type), a token and a full launch, with x rounded by
// the MatMul or by a producer before it.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"

#include "kernels/cuda/act_q8.h"
#include "kernels/cuda/api_counts.h"
#include "kernels/cuda/fused.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/quant_test_util.h"

namespace octo {
namespace {

using testing::RandomActivations;
using testing::RandomWeights;

constexpr int64_t kCols = 512;
constexpr int64_t kRows = 96;

class FusedResidualCudaTest : public testing::CudaOpTest {
 protected:
  struct Result {
    std::vector<float> product, residual;
    uint64_t launches = 0;
  };

  // The MatMul of w over x (x normed, and rounded by the norm when
  // `producer_rounds`) and the residual add after it: in one launch
  // (fused) or as MatMul then Add.
  Result Run(GgmlType type, int n_tokens, bool fused, bool producer_rounds) {
    auto d_w = Upload(RandomWeights(type, kRows, kCols, 21));
    auto d_in = Upload(RandomActivations(n_tokens * kCols, 22));
    auto d_norm = Upload(RandomActivations(kCols, 23));
    auto d_x = Output<float>(static_cast<size_t>(n_tokens * kCols));
    auto d_residual = Upload(RandomActivations(n_tokens * kRows, 24));
    auto d_out = Output<float>(static_cast<size_t>(n_tokens * kRows));
    const WeightMatrix w{type, d_w.get(), kRows, kCols};
    const cuda::Exec exec = Exec(cuda::MatMulScratchBytes(w, n_tokens));
    const cuda::ActQ8Out q8 = cuda::ActQ8At(exec.scratch, cuda::ActQ8RuleFor(type), n_tokens, kCols);
    EXPECT_TRUE((producer_rounds ? cuda::RmsNorm(d_in.get(), d_norm.get(), d_x.get(), n_tokens, kCols, 1e-5f,
                                                 stream(), q8)
                                 : cuda::RmsNorm(d_in.get(), d_norm.get(), d_x.get(), n_tokens, kCols, 1e-5f,
                                                 stream()))
                    .ok());
    float* const outs[] = {d_out.get()};
    const cuda::ApiCounts before = cuda::CurrentApiCounts();
    if (fused) {
      const absl::Status s = cuda::MatMulAdd(w, d_x.get(), d_out.get(), d_residual.get(), n_tokens, exec,
                                             producer_rounds ? &q8 : nullptr);
      EXPECT_TRUE(s.ok()) << s;
    } else {
      const absl::Status s = producer_rounds ? cuda::MatMulGroup({&w, 1}, d_x.get(), outs, n_tokens, exec, q8)
                                             : cuda::MatMul(w, d_x.get(), d_out.get(), n_tokens, exec);
      EXPECT_TRUE(s.ok()) << s;
      EXPECT_TRUE(cuda::Add(d_residual.get(), d_out.get(), d_residual.get(), n_tokens * kRows, stream()).ok());
    }
    Result r;
    r.launches = (cuda::CurrentApiCounts() - before).launches;
    r.product = d_out.Download(stream());
    r.residual = d_residual.Download(stream());
    return r;
  }
};

TEST_F(FusedResidualCudaTest, TheResidualAddInTheDecodeLaunchGivesTheTwoLaunchesBits) {
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kF16}) {
    for (int n_tokens : {1, 3, kMaxDecodeTokens}) {
      for (bool producer_rounds : {false, true}) {
        if (producer_rounds && type == GgmlType::kF16) continue;  // float weights read x as it is
        SCOPED_TRACE(absl::StrFormat("%s tokens %d%s", GgmlTypeName(type), n_tokens,
                                     producer_rounds ? " rounded by the norm" : ""));
        const Result apart = Run(type, n_tokens, false, producer_rounds);
        const Result fused = Run(type, n_tokens, true, producer_rounds);
        EXPECT_EQ(fused.launches + 1, apart.launches) << "the Add launch goes";
        ASSERT_EQ(fused.product.size(), apart.product.size());
        EXPECT_EQ(0, std::memcmp(fused.product.data(), apart.product.data(), fused.product.size() * 4));
        EXPECT_EQ(0, std::memcmp(fused.residual.data(), apart.residual.data(), fused.residual.size() * 4));
      }
    }
  }
}

TEST_F(FusedResidualCudaTest, RefusesAResidualItCannotAddIntoInOneLaunch) {
  auto d_w = Upload(RandomWeights(GgmlType::kQ8_0, kRows, kCols, 31));
  auto d_x = Upload(RandomActivations((kMaxDecodeTokens + 1) * kCols, 32));
  auto d_out = Output<float>((kMaxDecodeTokens + 1) * kRows);
  auto d_residual = Output<float>((kMaxDecodeTokens + 1) * kRows);
  const WeightMatrix w{GgmlType::kQ8_0, d_w.get(), kRows, kCols};
  const cuda::Exec exec = Exec(cuda::MatMulScratchBytes(w, kMaxDecodeTokens));
  const cuda::ApiCounts before = cuda::CurrentApiCounts();
  testing::ExpectInvalidArgument(cuda::MatMulAdd(w, d_x.get(), d_out.get(), nullptr, 1, exec), "MatMulAdd",
                                 "residual is null");
  testing::ExpectInvalidArgument(cuda::MatMulAdd(w, d_x.get(), d_out.get(), d_out.get() + 8, 1, exec), "MatMulAdd",
                                 "residual overlaps x or out");
  testing::ExpectInvalidArgument(cuda::MatMulAdd(w, d_x.get(), d_out.get(), d_x.get(), 1, exec), "MatMulAdd",
                                 "residual overlaps x or out");
  testing::ExpectInvalidArgument(
      cuda::MatMulAdd(w, d_x.get(), d_out.get(), d_residual.get(), kMaxDecodeTokens + 1, exec), "MatMulAdd",
      "one decode launch");
  EXPECT_EQ((cuda::CurrentApiCounts() - before).launches, 0u) << "nothing launched";
}

}  // namespace
}  // namespace octo
