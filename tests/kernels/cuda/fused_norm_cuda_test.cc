// The norms that do a neighbour op's work in their launch (fused.h), bit
// for bit what the two launches leave, in one launch fewer:
//   - CombineAddRmsNorm: the MoE layer's weighted expert sum added into the
//     residual stream by the next norm -- the residual, the norm's output
//     and its 8-bit activations; with and without a shared expert and its
//     gate, a token and a few, a row the norm holds in registers and one it
//     reads from memory, plain and rounded by both rules;
//   - RmsNormSiluMul: the gated DeltaNet output's head norm and its SiLU
//     gate -- the output and its 8-bit activations, rows of whole rounding
//     chunks and rows that share one (counted arrivals, left zeroed).
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>
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

class FusedNormCudaTest : public testing::CudaOpTest {
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

  // RmsNorm of n_rows rows of dim in place then SiluMul by a gate, in one
  // launch (fused) or two, rounded by `rule` when given.
  Result RunGated(int n_rows, int dim, std::optional<cuda::ActQ8Rule> rule, bool fused) {
    const int64_t n = int64_t{n_rows} * dim;
    auto d_x = Upload(RandomActivations(n, 41));
    auto d_gate = Upload(RandomActivations(n, 42));
    auto d_norm = Upload(RandomActivations(dim, 43));
    auto d_arrivals = Upload(std::vector<uint32_t>(static_cast<size_t>(n / cuda::kQ8Chunk), 0));
    const cuda::Exec exec = Exec(cuda::ActQ8Bytes(1, n));
    std::optional<cuda::ActQ8Out> q8;
    if (rule) {
      q8 = cuda::ActQ8At(exec.scratch, *rule, 1, n);
      q8->arrivals = d_arrivals.get();
    }
    const cuda::ApiCounts before = cuda::CurrentApiCounts();
    if (fused) {
      const absl::Status s = cuda::RmsNormSiluMul(d_x.get(), d_norm.get(), d_gate.get(), n_rows, dim, kEps, stream(),
                                                  q8 ? &*q8 : nullptr);
      EXPECT_TRUE(s.ok()) << s;
    } else {
      absl::Status s = cuda::RmsNorm(d_x.get(), d_norm.get(), d_x.get(), n_rows, dim, kEps, stream());
      EXPECT_TRUE(s.ok()) << s;
      s = q8 ? cuda::SiluMul(d_gate.get(), d_x.get(), d_x.get(), n, stream(), *q8)
             : cuda::SiluMul(d_gate.get(), d_x.get(), d_x.get(), n, stream());
      EXPECT_TRUE(s.ok()) << s;
    }
    Result r;
    r.launches = (cuda::CurrentApiCounts() - before).launches;
    r.out = d_x.Download(stream());
    if (q8) {
      r.act.resize(cuda::ActQ8Bytes(1, n));
      EXPECT_EQ(cudaMemcpy(r.act.data(), exec.scratch, r.act.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    for (const uint32_t count : d_arrivals.Download(stream())) EXPECT_EQ(count, 0u) << "the counters are left zeroed";
    return r;
  }
};

TEST_F(FusedNormCudaTest, TheNormCombiningTheExpertsGivesTheTwoLaunchesBits) {
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

TEST_F(FusedNormCudaTest, TheCombiningNormRefusesOverlapsAndWhatEitherOpRefuses) {
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

TEST_F(FusedNormCudaTest, TheGatedHeadNormGivesTheNormAndSiluMulBits) {
  // (dim, rows): heads of 128 (Qwen3-Next's): whole 32-element chunks, half
  // a 256-element one; heads of 64: a quarter of one; heads of 256.
  const std::pair<int, int> shapes[] = {{128, 2}, {128, 6}, {64, 8}, {64, 28}, {256, 3}};
  const std::optional<cuda::ActQ8Rule> rules[] = {std::nullopt, cuda::ActQ8Rule::kPer32, cuda::ActQ8Rule::kPer256};
  for (const auto& [dim, n_rows] : shapes) {
    for (const std::optional<cuda::ActQ8Rule> rule : rules) {
      SCOPED_TRACE(absl::StrFormat("dim %d rows %d rounded %d", dim, n_rows, rule ? static_cast<int>(*rule) : -1));
      const Result apart = RunGated(n_rows, dim, rule, false), fused = RunGated(n_rows, dim, rule, true);
      EXPECT_EQ(fused.launches + 1, apart.launches) << "one launch for the two";
      EXPECT_EQ(0, std::memcmp(fused.out.data(), apart.out.data(), fused.out.size() * 4));
      EXPECT_EQ(fused.act, apart.act) << "the rounding SiluMul's launch would write";
    }
  }
}

TEST_F(FusedNormCudaTest, TheGatedHeadNormRefusesWhatItCannotRound) {
  constexpr int kDim = 96, kRows = 8;
  auto d_x = Upload(RandomActivations(kDim * kRows, 1));
  auto d_norm = Upload(RandomActivations(kDim, 2));
  auto d_gate = Upload(RandomActivations(kDim * kRows, 3));
  const cuda::Exec exec = Exec(cuda::ActQ8Bytes(1, kDim * kRows));
  const cuda::ActQ8Out per32 = cuda::ActQ8At(exec.scratch, cuda::ActQ8Rule::kPer32, 1, kDim * kRows);
  const cuda::ActQ8Out per256 = cuda::ActQ8At(exec.scratch, cuda::ActQ8Rule::kPer256, 1, kDim * kRows);
  EXPECT_TRUE(cuda::RmsNormSiluMul(d_x.get(), d_norm.get(), d_gate.get(), kRows, kDim, kEps, stream(), &per32).ok());
  // 96 values: no whole 256-element chunk, nor a tile of one.
  testing::ExpectInvalidArgument(
      cuda::RmsNormSiluMul(d_x.get(), d_norm.get(), d_gate.get(), kRows, kDim, kEps, stream(), &per256),
      "RmsNormSiluMul", "neither hold");
  // Rows of 32 share 256-element chunks: counters needed.
  testing::ExpectInvalidArgument(
      cuda::RmsNormSiluMul(d_x.get(), d_norm.get(), d_gate.get(), 24, 32, kEps, stream(), &per256), "RmsNormSiluMul",
      "arrivals is null");
  testing::ExpectInvalidArgument(
      cuda::RmsNormSiluMul(d_x.get(), d_norm.get(), d_x.get() + kDim, kRows, kDim, kEps, stream()), "RmsNormSiluMul",
      "gate overlaps x");
  testing::ExpectInvalidArgument(cuda::RmsNormSiluMul(d_x.get(), d_norm.get(), nullptr, kRows, kDim, kEps, stream()),
                                 "SiluMul", "gate is null");
}

}  // namespace
}  // namespace octo
