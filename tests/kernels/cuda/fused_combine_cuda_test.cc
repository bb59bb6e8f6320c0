// cuda::CombineAddRmsNorm (fused.h): the MoE layer's weighted expert sum
// added into the residual stream by the next norm's launch leaves what
// MoeCombine then AddRmsNorm leave -- the residual, the norm's output and
// its 8-bit activations, bit for bit -- in one launch fewer; with and
// without a shared expert and its gate, a token and a few, a row the norm
// holds in registers and one it reads from memory, plain and rounded by
// both rules.
#include <cstdint>
#include <cstring>
#include <optional>
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

constexpr int kChoices = 4;
constexpr float kEps = 1e-5f;

enum class Shared { kNone, kUngated, kGated };

class FusedCombineCudaTest : public testing::CudaOpTest {
 protected:
  struct Result {
    std::vector<float> residual, out;
    std::vector<uint8_t> act;
    uint64_t launches = 0;
  };

  // MoeCombine of kChoices experts (and the shared expert) into out, then
  // AddRmsNorm of out into the residual, out the norm's output -- in one
  // launch (fused) or two -- rounded into q8 by `rule` when given.
  Result Run(int n_rows, int dim, Shared shared, std::optional<cuda::ActQ8Rule> rule, bool fused) {
    const int64_t n = int64_t{n_rows} * dim;
    auto d_experts = Upload(RandomActivations(n * kChoices, 31));
    auto d_weights = Upload(RandomActivations(int64_t{n_rows} * kChoices, 32));
    auto d_shared = Upload(RandomActivations(n, 33));
    auto d_gates = Upload(RandomActivations(n_rows, 34));
    auto d_residual = Upload(RandomActivations(n, 35));
    auto d_norm = Upload(RandomActivations(dim, 36));
    auto d_out = Output<float>(static_cast<size_t>(n));
    const cuda::Exec exec = Exec(cuda::ActQ8Bytes(n_rows, dim));
    const std::optional<cuda::ActQ8Out> q8 =
        rule ? std::optional(cuda::ActQ8At(exec.scratch, *rule, n_rows, dim)) : std::nullopt;
    const MoeCombineParams p{.expert_out = d_experts.get(),
                             .weights = d_weights.get(),
                             .shared = shared == Shared::kNone ? nullptr : d_shared.get(),
                             .shared_gate_logits = shared == Shared::kGated ? d_gates.get() : nullptr,
                             .out = d_out.get(),
                             .n_rows = n_rows,
                             .k = kChoices,
                             .dim = dim};
    const cuda::ApiCounts before = cuda::CurrentApiCounts();
    if (fused) {
      const absl::Status s =
          cuda::CombineAddRmsNorm(p, d_residual.get(), d_norm.get(), kEps, stream(), q8 ? &*q8 : nullptr);
      EXPECT_TRUE(s.ok()) << s;
    } else {
      absl::Status s = cuda::MoeCombine(p, stream());
      EXPECT_TRUE(s.ok()) << s;
      s = q8 ? cuda::AddRmsNorm(d_residual.get(), d_out.get(), d_norm.get(), d_out.get(), n_rows, dim, kEps, stream(),
                                *q8)
             : cuda::AddRmsNorm(d_residual.get(), d_out.get(), d_norm.get(), d_out.get(), n_rows, dim, kEps,
                                stream());
      EXPECT_TRUE(s.ok()) << s;
    }
    Result r;
    r.launches = (cuda::CurrentApiCounts() - before).launches;
    r.residual = d_residual.Download(stream());
    r.out = d_out.Download(stream());
    if (q8) {
      r.act.resize(cuda::ActQ8Bytes(n_rows, dim));
      EXPECT_EQ(cudaMemcpy(r.act.data(), exec.scratch, r.act.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return r;
  }
};

TEST_F(FusedCombineCudaTest, TheNormCombiningTheExpertsGivesTheTwoLaunchesBits) {
  const std::optional<cuda::ActQ8Rule> rules[] = {std::nullopt, cuda::ActQ8Rule::kPer32, cuda::ActQ8Rule::kPer256};
  // A row the norm holds in registers, and one it reads from memory
  // (rmsnorm.cu: more than 1024 threads' 8 elements).
  for (const int dim : {512, 9216}) {
    for (const int n_rows : {1, 3}) {
      for (const Shared shared : {Shared::kNone, Shared::kUngated, Shared::kGated}) {
        for (const std::optional<cuda::ActQ8Rule> rule : rules) {
          SCOPED_TRACE(absl::StrFormat("dim %d rows %d shared %d rounded %d", dim, n_rows, static_cast<int>(shared),
                                       rule ? static_cast<int>(*rule) : -1));
          const Result apart = Run(n_rows, dim, shared, rule, false), fused = Run(n_rows, dim, shared, rule, true);
          EXPECT_EQ(fused.launches + 1, apart.launches) << "the combine's launch goes";
          EXPECT_EQ(0, std::memcmp(fused.residual.data(), apart.residual.data(), fused.residual.size() * 4));
          EXPECT_EQ(0, std::memcmp(fused.out.data(), apart.out.data(), fused.out.size() * 4));
          EXPECT_EQ(fused.act, apart.act) << "the norm's rounding";
        }
      }
    }
  }
}

TEST_F(FusedCombineCudaTest, RefusesOverlapsAndWhatEitherOpRefuses) {
  constexpr int kDim = 256;
  auto d_experts = Upload(RandomActivations(kDim * kChoices, 1));
  auto d_weights = Upload(RandomActivations(kChoices, 2));
  auto d_residual = Upload(RandomActivations(kDim, 3));
  auto d_norm = Upload(RandomActivations(kDim, 4));
  auto d_out = Output<float>(kDim);
  const MoeCombineParams p{.expert_out = d_experts.get(), .weights = d_weights.get(), .out = d_out.get(),
                           .n_rows = 1, .k = kChoices, .dim = kDim};
  EXPECT_TRUE(cuda::CombineAddRmsNorm(p, d_residual.get(), d_norm.get(), kEps, stream()).ok());
  // The residual is an expert's output, or out.
  testing::ExpectInvalidArgument(cuda::CombineAddRmsNorm(p, d_experts.get(), d_norm.get(), kEps, stream()),
                                 "CombineAddRmsNorm", "x overlaps");
  testing::ExpectInvalidArgument(cuda::CombineAddRmsNorm(p, d_out.get(), d_norm.get(), kEps, stream()),
                                 "CombineAddRmsNorm", "x overlaps");
  // out is where the last expert's output lies.
  MoeCombineParams onto_experts = p;
  onto_experts.out = d_experts.get() + (kChoices - 1) * kDim;
  testing::ExpectInvalidArgument(cuda::CombineAddRmsNorm(onto_experts, d_residual.get(), d_norm.get(), kEps, stream()),
                                 "CombineAddRmsNorm", "out overlaps");
  // MoeCombine's own refusals, and the norm's.
  MoeCombineParams no_choices = p;
  no_choices.k = 0;
  testing::ExpectInvalidArgument(cuda::CombineAddRmsNorm(no_choices, d_residual.get(), d_norm.get(), kEps, stream()),
                                 "MoeCombine", "must be positive");
  testing::ExpectInvalidArgument(cuda::CombineAddRmsNorm(p, d_residual.get(), nullptr, kEps, stream()), "RmsNorm",
                                 "weight");
  // Rows of 128 values hold no whole 256-element chunk.
  const cuda::Exec exec = Exec(cuda::ActQ8Bytes(1, 512));
  const cuda::ActQ8Out per256 = cuda::ActQ8At(exec.scratch, cuda::ActQ8Rule::kPer256, 1, 512);
  MoeCombineParams odd = p;
  odd.dim = 128;
  testing::ExpectInvalidArgument(cuda::CombineAddRmsNorm(odd, d_residual.get(), d_norm.get(), kEps, stream(), &per256),
                                 "CombineAddRmsNorm", "rounding chunks");
}

}  // namespace
}  // namespace octo
