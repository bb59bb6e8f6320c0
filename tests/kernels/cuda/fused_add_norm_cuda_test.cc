// cuda::MatMulAddRmsNorm (fused.h): wo's or down's decode launch adding its
// output into the residual stream and, in its last block, norming the
// stream for the next layer part leaves what MatMulAdd then RmsNorm leave
// -- the product, the residual, the norm's output and its 8-bit
// activations, bit for bit -- in one launch fewer: a staged type, a 16-byte
// unit type and a float type, one token and several, rows a norm block
// holds in registers and rows it reads again (past 8192), rows narrower
// than a 1024-thread norm block, both rounding rules, and the norm's
// rounding written over the MatMul's own (the scratch front, where the
// backend's consumer reads it). The counter is left zero: a second launch
// reusing it gives the same bits.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
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

constexpr int64_t kCols = 256;
constexpr float kEps = 1e-6f;

struct Case {
  GgmlType type;
  int64_t rows;  // the projection's rows: the norm's dim
  int n_tokens;
  std::optional<cuda::ActQ8Rule> rule;  // the norm's rounding for its reader, if any
};

std::string Name(const Case& c) {
  return absl::StrFormat("%s rows %d tokens %d rounding %s", GgmlTypeName(c.type), c.rows, c.n_tokens,
                         !c.rule                              ? "none"
                         : *c.rule == cuda::ActQ8Rule::kPer32 ? "per 32"
                                                              : "per 256");
}

class FusedAddNormCudaTest : public testing::CudaOpTest {
 protected:
  struct Result {
    std::vector<float> product, residual, normed;
    std::vector<uint8_t> act;
    uint64_t launches = 0;
    uint32_t counter = 0;
  };

  // w's product over x added into the residual, then the residual normed
  // into `normed` (and rounded at the scratch's front by c.rule): in one
  // launch, `launches` times over with one counter (fused), or as MatMulAdd
  // then RmsNorm.
  Result Run(const Case& c, bool fused, int launches = 1) {
    const int64_t n = c.n_tokens * c.rows;
    auto d_w = Upload(RandomWeights(c.type, c.rows, kCols, 41));
    auto d_x = Upload(RandomActivations(c.n_tokens * kCols, 42));
    auto d_residual = Upload(RandomActivations(n, 43));
    auto d_weight = Upload(RandomActivations(c.rows, 44));
    auto d_out = Output<float>(static_cast<size_t>(n));
    auto d_normed = Output<float>(static_cast<size_t>(n));
    auto d_counter = Upload(std::vector<uint32_t>(1, 0));
    const WeightMatrix w{c.type, d_w.get(), c.rows, kCols};
    const size_t act_bytes = c.rule ? cuda::ActQ8Bytes(c.n_tokens, c.rows) : 0;
    const cuda::Exec exec = Exec(std::max(cuda::MatMulScratchBytes(w, c.n_tokens), act_bytes));
    const std::optional<cuda::ActQ8Out> q8 =
        c.rule ? std::optional(cuda::ActQ8At(exec.scratch, *c.rule, c.n_tokens, c.rows)) : std::nullopt;
    const cuda::ApiCounts before = cuda::CurrentApiCounts();
    for (int i = 0; i < launches; ++i) {
      if (i > 0) {  // the residual as it was: each launch does the same work
        const std::vector<float> residual = RandomActivations(n, 43);
        EXPECT_EQ(cudaMemcpyAsync(d_residual.get(), residual.data(), n * 4, cudaMemcpyHostToDevice, stream()), cudaSuccess);
        Sync();
      }
      if (fused) {
        const cuda::NormAfterAdd norm{d_weight.get(), d_normed.get(), kEps, d_counter.get()};
        const absl::Status s = cuda::MatMulAddRmsNorm(w, d_x.get(), d_out.get(), d_residual.get(), c.n_tokens, norm,
                                                      exec, nullptr, q8 ? &*q8 : nullptr);
        EXPECT_TRUE(s.ok()) << s;
      } else {
        absl::Status s = cuda::MatMulAdd(w, d_x.get(), d_out.get(), d_residual.get(), c.n_tokens, exec);
        EXPECT_TRUE(s.ok()) << s;
        s = q8 ? cuda::RmsNorm(d_residual.get(), d_weight.get(), d_normed.get(), c.n_tokens, c.rows, kEps, stream(),
                               *q8)
               : cuda::RmsNorm(d_residual.get(), d_weight.get(), d_normed.get(), c.n_tokens, c.rows, kEps, stream());
        EXPECT_TRUE(s.ok()) << s;
      }
    }
    Result r;
    r.launches = (cuda::CurrentApiCounts() - before).launches;
    r.product = d_out.Download(stream());
    r.residual = d_residual.Download(stream());
    r.normed = d_normed.Download(stream());
    r.counter = d_counter.Download(stream())[0];
    if (c.rule) {
      r.act.resize(act_bytes);
      EXPECT_EQ(cudaMemcpy(r.act.data(), exec.scratch, act_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return r;
  }

  void ExpectSameBits(const Result& fused, const Result& apart) {
    ASSERT_EQ(fused.normed.size(), apart.normed.size());
    EXPECT_EQ(0, std::memcmp(fused.product.data(), apart.product.data(), fused.product.size() * 4)) << "product";
    EXPECT_EQ(0, std::memcmp(fused.residual.data(), apart.residual.data(), fused.residual.size() * 4)) << "residual";
    EXPECT_EQ(0, std::memcmp(fused.normed.data(), apart.normed.data(), fused.normed.size() * 4)) << "the norm's out";
    EXPECT_EQ(fused.act, apart.act) << "the norm's 8-bit activations";
    EXPECT_EQ(fused.counter, 0u) << "the counter is left zero";
  }
};

TEST_F(FusedAddNormCudaTest, TheNormInTheProjectionsLastBlockGivesTheTwoLaunchesBits) {
  std::vector<Case> cases;
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kF16}) {
    for (int n_tokens : {1, 3, cuda::kMaxNormAfterAddTokens, kMaxDecodeTokens}) {
      cases.push_back({type, 512, n_tokens, std::nullopt});
      cases.push_back({type, 512, n_tokens, cuda::ActQ8Rule::kPer32});
      cases.push_back({type, 512, n_tokens, cuda::ActQ8Rule::kPer256});
    }
    cases.push_back({type, 96, 2, cuda::ActQ8Rule::kPer32});  // a 96-thread norm block, played
  }
  cases.push_back({GgmlType::kQ6_K, 4096, 1, cuda::ActQ8Rule::kPer256});  // 1024 threads, 4 elements each
  cases.push_back({GgmlType::kQ8_0, 9216, 2, cuda::ActQ8Rule::kPer32});   // past a held row: read again
  for (const Case& c : cases) {
    SCOPED_TRACE(Name(c));
    const Result apart = Run(c, false);
    const Result fused = Run(c, true);
    EXPECT_EQ(fused.launches + 1, apart.launches) << "the norm's launch goes";
    ExpectSameBits(fused, apart);
  }
}

TEST_F(FusedAddNormCudaTest, ASecondLaunchFindsTheCounterZeroAndGivesTheSameBits) {
  const Case c{GgmlType::kQ4_K, 512, 2, cuda::ActQ8Rule::kPer32};
  const Result apart = Run(c, false);
  const Result fused = Run(c, true, /*launches=*/3);
  EXPECT_EQ(fused.launches, 3u * (apart.launches - 1));
  ExpectSameBits(fused, apart);
}

TEST_F(FusedAddNormCudaTest, RefusesWhatItCannotNormAndLaunchesNothing) {
  constexpr int64_t kRows = 256;
  auto d_w = Upload(RandomWeights(GgmlType::kQ8_0, kRows, kCols, 51));
  auto d_x = Upload(RandomActivations(2 * kCols, 52));
  auto d_out = Output<float>(2 * kRows);
  auto d_residual = Output<float>(2 * kRows);
  auto d_weight = Upload(RandomActivations(kRows, 53));
  auto d_normed = Output<float>(2 * kRows);
  auto d_counter = Upload(std::vector<uint32_t>(1, 0));
  const WeightMatrix w{GgmlType::kQ8_0, d_w.get(), kRows, kCols};
  const cuda::Exec exec = Exec(cuda::MatMulScratchBytes(w, 2));
  const cuda::NormAfterAdd good{d_weight.get(), d_normed.get(), kEps, d_counter.get()};
  auto run = [&](const cuda::NormAfterAdd& norm, float* residual, const cuda::ActQ8Out* q8 = nullptr) {
    return cuda::MatMulAddRmsNorm(w, d_x.get(), d_out.get(), residual, 2, norm, exec, nullptr, q8);
  };
  const cuda::ApiCounts before = cuda::CurrentApiCounts();
  testing::ExpectInvalidArgument(run(good, nullptr), "MatMulAddRmsNorm", "residual is null");
  cuda::NormAfterAdd no_counter = good;
  no_counter.arrival = nullptr;
  testing::ExpectInvalidArgument(run(no_counter, d_residual.get()), "MatMulAddRmsNorm", "norm.arrival is null");
  cuda::NormAfterAdd onto_residual = good;
  onto_residual.out = d_residual.get() + 8;
  testing::ExpectInvalidArgument(run(onto_residual, d_residual.get()), "MatMulAddRmsNorm",
                                 "the norm's out overlaps residual");
  cuda::NormAfterAdd no_weight = good;
  no_weight.weight = nullptr;
  testing::ExpectInvalidArgument(run(no_weight, d_residual.get()), "MatMulAddRmsNorm", "null pointer");
  cuda::NormAfterAdd bad_eps = good;
  bad_eps.eps = -1.0f;
  testing::ExpectInvalidArgument(run(bad_eps, d_residual.get()), "MatMulAddRmsNorm", "eps (-1) must be >= 0");
  const cuda::ActQ8Out no_quants{};
  testing::ExpectInvalidArgument(run(good, d_residual.get(), &no_quants), "MatMulAddRmsNorm", "q8 is null");
  EXPECT_EQ((cuda::CurrentApiCounts() - before).launches, 0u) << "nothing launched";
}

}  // namespace
}  // namespace octo
