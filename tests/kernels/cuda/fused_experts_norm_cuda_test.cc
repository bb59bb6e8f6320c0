// cuda::MatMulExpertsCombineNorm (fused.h): the down experts' decode launch
// combining its rows into the residual stream and norming the stream in its
// last block leaves what MatMulExpertsGroup, then CombineAddRmsNorm leave --
// the experts' rows, the residual, the norm's output and its 8-bit
// activations, bit for bit -- in one launch fewer: a staged type and 16-byte
// unit ones, one token to four, with and without a shared expert (gated or
// not), an expert id out of range (NaN rows), both rounding rules and none,
// the norm's rounding written over the experts' own (the scratch front,
// where the backend's consumer reads it). The counter is left zero: a second
// launch reusing it gives the same bits. Arguments it cannot take launch
// nothing.
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
using testing::SameBytes;

constexpr int kExperts = 4, kChoices = 3;
constexpr int64_t kWidth = 512;  // each choice's hidden row: the down experts' columns
constexpr float kEps = 1e-5f;

enum class Shared { kNone, kPlain, kGated };

struct Case {
  GgmlType type;
  int dim;  // rows per expert: the norm's dim
  int n_tokens;
  Shared shared;
  std::optional<cuda::ActQ8Rule> rule;  // the norm's rounding for its reader, if any
};

std::string Name(const Case& c) {
  return absl::StrFormat("%s dim %d tokens %d shared %d rounding %s", GgmlTypeName(c.type), c.dim, c.n_tokens,
                         static_cast<int>(c.shared),
                         !c.rule                              ? "none"
                         : *c.rule == cuda::ActQ8Rule::kPer32 ? "per 32"
                                                              : "per 256");
}

class FusedExpertsNormCudaTest : public testing::CudaOpTest {
 protected:
  struct Result {
    std::vector<float> rows, residual, normed;
    std::vector<uint8_t> act;
    uint64_t launches = 0;
    uint32_t counter = 0;
  };

  // The SiLU product rounded for the down experts, the experts, then their
  // rows combined into the residual and normed (rounded at the scratch's
  // front by c.rule): the down experts and the norm in one launch,
  // `launches` times over with one counter (fused), or apart.
  Result Run(const Case& c, bool fused, int launches = 1) {
    const int n_choices = c.n_tokens * kChoices;
    const int64_t n_hidden = n_choices * kWidth, n = int64_t{c.n_tokens} * c.dim;
    std::vector<int32_t> ids(static_cast<size_t>(n_choices));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((2 * i + 1) % kExperts);
    if (c.n_tokens > 1) ids[4] = kExperts;  // out of range: NaN rows
    auto d_down = Upload(RandomWeights(c.type, int64_t{kExperts} * c.dim, kWidth, 51));
    auto d_ids = Upload(ids);
    auto d_gate = Upload(RandomActivations(static_cast<int>(n_hidden), 52));
    auto d_up = Upload(RandomActivations(static_cast<int>(n_hidden), 53));
    auto d_weights = Upload(RandomActivations(n_choices, 54));
    auto d_shared = Upload(RandomActivations(static_cast<int>(n), 55));
    auto d_gate_logits = Upload(RandomActivations(c.n_tokens, 56));
    auto d_residual = Upload(RandomActivations(static_cast<int>(n), 57));
    auto d_norm_weight = Upload(RandomActivations(c.dim, 58));
    auto d_hidden = Output<float>(static_cast<size_t>(n_hidden));
    auto d_rows = Output<float>(static_cast<size_t>(n_choices) * c.dim);
    auto d_normed = Output<float>(static_cast<size_t>(n));
    auto d_counter = Upload(std::vector<uint32_t>(1, 0));
    const WeightMatrix down{c.type, d_down.get(), int64_t{kExperts} * c.dim, kWidth};
    const MatMulExpertsParams p{kExperts, kChoices, c.n_tokens, true};
    const size_t act_bytes = c.rule ? cuda::ActQ8Bytes(c.n_tokens, c.dim) : 0;
    const cuda::Exec exec = Exec(std::max(cuda::MatMulExpertsScratchBytes(down, p), act_bytes));
    const cuda::ActQ8Out rounded = cuda::ActQ8At(exec.scratch, *cuda::ExpertsRounding(down), n_choices, kWidth);
    const std::optional<cuda::ActQ8Out> q8 =
        c.rule ? std::optional(cuda::ActQ8At(exec.scratch, *c.rule, c.n_tokens, c.dim)) : std::nullopt;
    const MoeCombineParams combine{.expert_out = d_rows.get(),
                                   .weights = d_weights.get(),
                                   .shared = c.shared != Shared::kNone ? d_shared.get() : nullptr,
                                   .shared_gate_logits = c.shared == Shared::kGated ? d_gate_logits.get() : nullptr,
                                   .out = d_normed.get(),
                                   .n_rows = c.n_tokens,
                                   .k = kChoices,
                                   .dim = c.dim};
    const cuda::CombineAfterExperts tail{combine, d_residual.get(), d_norm_weight.get(), kEps, d_counter.get()};
    const std::vector<float> residual_before = d_residual.Download(stream());
    Result r;
    for (int i = 0; i < launches; ++i) {
      EXPECT_EQ(cudaStreamSynchronize(stream()), cudaSuccess);  // the launch before has read the residual
      EXPECT_EQ(cudaMemcpy(d_residual.get(), residual_before.data(), residual_before.size() * 4,
                           cudaMemcpyHostToDevice),
                cudaSuccess);
      EXPECT_TRUE(cuda::SiluMul(d_gate.get(), d_up.get(), d_hidden.get(), n_hidden, stream(), rounded).ok());
      const uint64_t before = cuda::CurrentApiCounts().launches;
      absl::Status s;
      if (fused) {
        s = cuda::MatMulExpertsCombineNorm(down, d_ids.get(), d_hidden.get(), d_rows.get(), p, tail, exec, rounded,
                                           q8 ? &*q8 : nullptr);
      } else {
        float* const outs[] = {d_rows.get()};
        s = cuda::MatMulExpertsGroup({&down, 1}, d_ids.get(), d_hidden.get(), outs, p, exec, &rounded);
        if (s.ok()) {
          s = cuda::CombineAddRmsNorm(combine, d_residual.get(), d_norm_weight.get(), kEps, stream(),
                                      q8 ? &*q8 : nullptr);
        }
      }
      EXPECT_TRUE(s.ok()) << s;
      r.launches = cuda::CurrentApiCounts().launches - before;
    }
    r.rows = d_rows.Download(stream());
    r.residual = d_residual.Download(stream());
    r.normed = d_normed.Download(stream());
    r.act.resize(act_bytes);
    EXPECT_EQ(cudaMemcpy(r.act.data(), exec.scratch, act_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    r.counter = d_counter.Download(stream())[0];
    return r;
  }
};

TEST_F(FusedExpertsNormCudaTest, TheDownExpertsLaunchCombinesAndNormsWithTheBitsOfTheLaunchesApart) {
  std::vector<Case> cases;
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0, GgmlType::kQ6_K}) {
    for (int n_tokens : {1, 2, 4}) {
      for (Shared shared : {Shared::kNone, Shared::kPlain, Shared::kGated}) {
        cases.push_back({type, 256, n_tokens, shared, cuda::ActQ8Rule::kPer32});
      }
    }
    cases.push_back({type, 256, 2, Shared::kGated, std::nullopt});
    cases.push_back({type, 512, 3, Shared::kNone, cuda::ActQ8Rule::kPer256});
  }
  cases.push_back({GgmlType::kQ4_K, 2048, 2, Shared::kGated, cuda::ActQ8Rule::kPer256});
  cases.push_back({GgmlType::kQ8_0, 96, 1, Shared::kPlain, cuda::ActQ8Rule::kPer32});
  for (const Case& c : cases) {
    SCOPED_TRACE(Name(c));
    const Result apart = Run(c, false);
    const Result fused = Run(c, true, 2);
    EXPECT_EQ(apart.launches, 2u);
    EXPECT_EQ(fused.launches, 1u) << "the combine and norm go in the experts' launch";
    EXPECT_TRUE(SameBytes(fused.rows, apart.rows)) << "the experts' rows";
    EXPECT_TRUE(SameBytes(fused.residual, apart.residual)) << "the residual";
    EXPECT_TRUE(SameBytes(fused.normed, apart.normed)) << "the norm's output";
    EXPECT_TRUE(SameBytes(fused.act, apart.act)) << "the norm's rounding";
    EXPECT_EQ(fused.counter, 0u) << "left zero for the next launch";
  }
}

TEST_F(FusedExpertsNormCudaTest, RefusesWhatItCannotFuseWithoutLaunching) {
  constexpr int kDim = 96, kTokens = 1;
  const GgmlType type = GgmlType::kQ8_0;
  auto d_down = Upload(RandomWeights(type, int64_t{kExperts} * kDim, kWidth, 61));
  auto d_ids = Upload(std::vector<int32_t>(8 * kChoices, 1));
  auto d_hidden = Upload(RandomActivations(8 * kChoices * kWidth, 62));
  auto d_weights = Upload(RandomActivations(8 * kChoices, 63));
  auto d_rows = Output<float>(static_cast<size_t>(8) * kChoices * kDim);
  auto d_residual = Upload(RandomActivations(8 * kDim, 64));
  auto d_norm_weight = Upload(RandomActivations(kDim, 65));
  auto d_normed = Output<float>(static_cast<size_t>(8) * kDim);
  auto d_counter = Upload(std::vector<uint32_t>(1, 0));
  const WeightMatrix down{type, d_down.get(), int64_t{kExperts} * kDim, kWidth};
  const MatMulExpertsParams p{kExperts, kChoices, kTokens, true};
  const MatMulExpertsParams p5{kExperts, kChoices, 5, true};
  const cuda::Exec exec = Exec(cuda::MatMulExpertsScratchBytes(down, p5));
  const cuda::ActQ8Out rounded = cuda::ActQ8At(exec.scratch, *cuda::ExpertsRounding(down), 5 * kChoices, kWidth);
  const MoeCombineParams combine{.expert_out = d_rows.get(),
                                 .weights = d_weights.get(),
                                 .out = d_normed.get(),
                                 .n_rows = kTokens,
                                 .k = kChoices,
                                 .dim = kDim};
  const cuda::CombineAfterExperts tail{combine, d_residual.get(), d_norm_weight.get(), kEps, d_counter.get()};
  auto refused = [&](const cuda::CombineAfterExperts& t, const MatMulExpertsParams& params,
                     const cuda::ActQ8Out* round_norm, const char* what) {
    const uint64_t before = cuda::CurrentApiCounts().launches;
    const absl::Status s = cuda::MatMulExpertsCombineNorm(down, d_ids.get(), d_hidden.get(), d_rows.get(), params, t,
                                                          exec, rounded, round_norm);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << what << ": " << s;
    EXPECT_EQ(cuda::CurrentApiCounts().launches, before) << what;
  };
  // Five tokens: past what a last block norms.
  cuda::CombineAfterExperts five = tail;
  five.combine.n_rows = 5;
  refused(five, p5, nullptr, "five tokens");
  cuda::CombineAfterExperts elsewhere = tail;
  elsewhere.combine.expert_out = d_hidden.get();
  refused(elsewhere, p, nullptr, "a combine of rows the launch does not write");
  cuda::CombineAfterExperts narrow = tail;
  narrow.combine.dim = kDim / 2;
  refused(narrow, p, nullptr, "a combine of another width");
  cuda::CombineAfterExperts overlapping = tail;
  overlapping.x = d_rows.get();
  refused(overlapping, p, nullptr, "a residual over the experts' rows");
  cuda::CombineAfterExperts uncounted = tail;
  uncounted.arrival = nullptr;
  refused(uncounted, p, nullptr, "no counter");
  const cuda::ActQ8Out per256 = cuda::ActQ8At(exec.scratch, cuda::ActQ8Rule::kPer256, kTokens, kDim);
  refused(tail, p, &per256, "96 values are not whole 256-element chunks");
  const cuda::ActQ8Out other_rule = cuda::ActQ8At(exec.scratch, cuda::ActQ8Rule::kPer256, 5 * kChoices, kWidth);
  const uint64_t before = cuda::CurrentApiCounts().launches;
  EXPECT_FALSE(cuda::MatMulExpertsCombineNorm(down, d_ids.get(), d_hidden.get(), d_rows.get(), p, tail, exec,
                                              other_rule)
                   .ok())
      << "Q8_0 reads activations rounded per 32";
  EXPECT_EQ(cuda::CurrentApiCounts().launches, before);
  // And the arguments it takes, it launches once.
  EXPECT_TRUE(cuda::MatMulExpertsCombineNorm(down, d_ids.get(), d_hidden.get(), d_rows.get(), p, tail, exec, rounded)
                  .ok());
  EXPECT_EQ(cuda::CurrentApiCounts().launches, before + 1);
}

}  // namespace
}  // namespace octo
