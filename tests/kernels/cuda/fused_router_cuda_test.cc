// kernels/cuda/fused.h's MatMulTopKExperts: a mixture-of-experts router's
// MatMul, the top-k experts of its logits and the rounding of x for the
// experts in one launch give the logits, ids, weights and 8-bit activations
// of MatMul, TopKExperts and the quantize launch apart, bit for bit -- for
// any number of experts (the last block plays TopKExperts' block of
// SoftmaxThreads(n_experts) threads, fewer or more than its own), a token
// and many, ties and NaN rows, a shared expert's gate row in the launch or
// not -- and the gate and up experts read that rounding in place of their
// own.
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "kernels/cuda/act_q8.h"
#include "kernels/cuda/api_counts.h"
#include "kernels/cuda/fused.h"
#include "kernels/cuda/matmul_paths.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/quant_test_util.h"

namespace octo {
namespace {

using testing::ExpectInvalidArgument;
using testing::RandomActivations;
using testing::RandomWeights;
using testing::SameBytes;

class FusedRouterCudaTest : public testing::CudaOpTest {
 protected:
  uint64_t Launches() { return cuda::CurrentApiCounts().launches; }
};

struct Case {
  GgmlType type;
  int n_experts, k, n_tokens;
  bool normalize;
  std::optional<cuda::ActQ8Rule> rounding;
  bool tied = false;  // every other router row a copy of the one before: equal logits
  bool nan = false;   // token 0's x holds a NaN: its logits are NaN
  bool gate = false;  // a shared expert's gate row in the launch too
};

std::string Name(const Case& c) {
  return absl::StrFormat("%s experts %d k %d tokens %d%s%s%s%s%s", GgmlTypeName(c.type), c.n_experts, c.k,
                         c.n_tokens, c.normalize ? " normalized" : "",
                         c.rounding ? (*c.rounding == cuda::ActQ8Rule::kPer256 ? " per-256" : " per-32") : "",
                         c.tied ? " tied" : "", c.nan ? " nan" : "", c.gate ? " shared gate" : "");
}

TEST_F(FusedRouterCudaTest, OneLaunchGivesTheMatMulTopKAndRoundingBits) {
  constexpr int64_t kCols = 512;  // 2 chunks of 256, 16 of 32
  using R = cuda::ActQ8Rule;
  // Experts: one warp's worth and less (8, 60: TopKExperts' block is
  // smaller than the router's 128 threads), exactly (128), more (160, 512:
  // the last block plays 5 and 16 warps), and past 1024 (several experts a
  // played thread).
  const std::vector<Case> cases = {
      {GgmlType::kF32, 8, 2, 1, true, R::kPer256},
      {GgmlType::kF32, 8, 2, 3, true, R::kPer256, false, false, true},  // the gate's warp in the router's block
      {GgmlType::kF32, 60, 4, 3, true, R::kPer32},
      {GgmlType::kF32, 128, 8, 1, true, R::kPer256},
      {GgmlType::kF32, 128, 8, 16, false, std::nullopt},
      {GgmlType::kF16, 160, 6, 16, false, R::kPer32, false, false, true},
      {GgmlType::kBF16, 512, 10, 1, true, R::kPer256, false, false, true},  // the gate's warp a block of its own
      {GgmlType::kF32, 128, 8, 1, true, R::kPer256, false, false, true},
      {GgmlType::kF32, 512, 10, 16, false, R::kPer256},
      {GgmlType::kF32, 512, 10, 3, true, R::kPer256, true},
      {GgmlType::kF32, 1100, 3, 16, false, std::nullopt},
      {GgmlType::kF32, 64, 4, 3, true, R::kPer32, false, true, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(Name(c));
    std::vector<uint8_t> w = RandomWeights(c.type, c.n_experts, kCols, 11);
    const size_t row_bytes = w.size() / c.n_experts;
    if (c.tied) {
      for (int e = 1; e < c.n_experts; e += 2) std::memcpy(&w[e * row_bytes], &w[(e - 1) * row_bytes], row_bytes);
    }
    // Small logits (about 0.25 apart): every expert's exp counts in the
    // softmax's sum, so a sum in another order would show in the weights.
    std::vector<float> x = RandomActivations(c.n_tokens * kCols, 12);
    for (float& v : x) v *= 1.0f / 64;
    if (c.nan) x[5] = std::numeric_limits<float>::quiet_NaN();
    auto d_w = Upload(w);
    auto d_x = Upload(x);
    const WeightMatrix router{c.type, d_w.get(), c.n_experts, kCols};
    auto d_gate_w = Upload(RandomWeights(c.type, 1, kCols, 13));
    const WeightMatrix gate_w{c.type, d_gate_w.get(), 1, kCols};
    auto gate_out = Output<float>(c.n_tokens);
    const size_t n_logits = static_cast<size_t>(c.n_tokens) * c.n_experts, n_picks = static_cast<size_t>(c.n_tokens) * c.k;
    const size_t act_bytes = cuda::ActQ8Bytes(c.n_tokens, kCols);
    const cuda::Exec exec = Exec(2 * act_bytes);

    // Apart: MatMul, TopKExperts, and x's rounding by the quantize launch
    // (a matrix of a type that rounds by the rule).
    auto logits = Output<float>(n_logits);
    auto ids = Output<int32_t>(n_picks);
    auto weights = Output<float>(n_picks);
    uint64_t before = Launches();
    ASSERT_TRUE(cuda::MatMul(router, d_x.get(), logits.get(), c.n_tokens, exec).ok());
    if (c.gate) {
      ASSERT_TRUE(cuda::MatMul(gate_w, d_x.get(), gate_out.get(), c.n_tokens, exec).ok());
    }
    ASSERT_TRUE(
        cuda::TopKExperts(logits.get(), c.n_tokens, c.n_experts, c.k, c.normalize, ids.get(), weights.get(), stream())
            .ok());
    // The quants and scales a rounding wrote at `at` (not the padding after
    // each, which no launch writes).
    auto activations = [&](void* at) {
      Sync();
      const cuda::ActQ8Out q8 = cuda::ActQ8At(at, R::kPer32, c.n_tokens, kCols);
      std::vector<int8_t> q(static_cast<size_t>(c.n_tokens) * kCols);
      std::vector<float> d(q.size() / cuda::kQ8Chunk);
      EXPECT_EQ(cudaMemcpy(q.data(), q8.q, q.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(d.data(), q8.d, d.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      return std::make_pair(q, d);
    };
    std::pair<std::vector<int8_t>, std::vector<float>> act_apart;
    if (c.rounding) {
      cuda::matmul::ActQ8View view;
      const GgmlType rounds = *c.rounding == R::kPer256 ? GgmlType::kQ4_K : GgmlType::kQ8_0;
      ASSERT_TRUE(cuda::matmul::QuantizeActivations(rounds, d_x.get(), c.n_tokens, kCols, exec, &view).ok());
      ASSERT_EQ(static_cast<void*>(view.q), exec.scratch);
      act_apart = activations(exec.scratch);
    }
    EXPECT_EQ(Launches() - before, 2u + (c.rounding ? 1u : 0u) + (c.gate ? 1u : 0u));

    // Fused, twice: the counter is left zero for the next launch.
    auto arrival = Upload(std::vector<uint32_t>{0});
    for (int run = 0; run < 2; ++run) {
      SCOPED_TRACE(run == 0 ? "first launch" : "second launch");
      auto f_logits = Output<float>(n_logits);
      auto f_ids = Output<int32_t>(n_picks);
      auto f_weights = Output<float>(n_picks);
      auto f_gate_out = Output<float>(c.n_tokens);
      const cuda::SharedGateRow gate{gate_w, f_gate_out.get()};
      const cuda::TopKExpertsOut top_k{c.k, c.normalize, f_ids.get(), f_weights.get(), arrival.get()};
      // Rounded into the scratch's second half (the first holds nothing now).
      const cuda::ActQ8Out q8 = cuda::ActQ8At(static_cast<uint8_t*>(exec.scratch) + act_bytes,
                                              c.rounding.value_or(R::kPer32), c.n_tokens, kCols);
      before = Launches();
      absl::Status s = cuda::MatMulTopKExperts(router, d_x.get(), f_logits.get(), c.n_tokens, top_k, exec,
                                               c.rounding ? &q8 : nullptr, c.gate ? &gate : nullptr);
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ(Launches() - before, 1u);
      EXPECT_TRUE(SameBytes(f_logits.Download(stream()), logits.Download(stream()))) << "MatMul's logits";
      EXPECT_EQ(f_ids.Download(stream()), ids.Download(stream())) << "TopKExperts' ids";
      EXPECT_TRUE(SameBytes(f_weights.Download(stream()), weights.Download(stream()))) << "TopKExperts' weights";
      EXPECT_EQ(arrival.Download(stream()), std::vector<uint32_t>{0}) << "the counter left zero";
      if (c.gate) {
        EXPECT_TRUE(SameBytes(f_gate_out.Download(stream()), gate_out.Download(stream()))) << "the gate's";
      }
      if (c.rounding) {
        const auto act = activations(static_cast<uint8_t*>(exec.scratch) + act_bytes);
        EXPECT_EQ(act.first, act_apart.first) << "the quantize launch's quants";
        EXPECT_TRUE(SameBytes(act.second, act_apart.second)) << "the quantize launch's scales";
      }
    }
    if (c.nan) {
      const std::vector<int32_t> got = ids.Download(stream());
      for (int j = 0; j < c.k; ++j) EXPECT_EQ(got[j], j) << "a NaN row picks experts 0, 1, ...";
    }
  }
}

TEST_F(FusedRouterCudaTest, TheGateAndUpExpertsReadTheRouterRounding) {
  constexpr int kExperts = 8, kK = 2, kWidth = 64;
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0}) {
    for (int64_t cols : {512, 4096}) {
      for (int n_tokens : {1, 3}) {
        SCOPED_TRACE(absl::StrFormat("%s cols %d tokens %d", GgmlTypeName(type), cols, n_tokens));
        auto d_router = Upload(RandomWeights(GgmlType::kF32, kExperts, cols, 21));
        auto d_gate = Upload(RandomWeights(type, kExperts * kWidth, cols, 22));
        auto d_up = Upload(RandomWeights(type, kExperts * kWidth, cols, 23));
        auto d_x = Upload(RandomActivations(n_tokens * cols, 24));
        const WeightMatrix router{GgmlType::kF32, d_router.get(), kExperts, cols};
        const WeightMatrix gate{type, d_gate.get(), kExperts * kWidth, cols}, up{type, d_up.get(), kExperts * kWidth, cols};
        const MatMulExpertsParams p{kExperts, kK, n_tokens, false};
        const size_t n_out = static_cast<size_t>(n_tokens) * kK * kWidth;
        const cuda::Exec exec = Exec(2 * cuda::MatMulExpertsScratchBytes(gate, p));
        auto logits = Output<float>(static_cast<size_t>(n_tokens) * kExperts);
        auto ids = Output<int32_t>(static_cast<size_t>(n_tokens) * kK);
        auto weights = Output<float>(static_cast<size_t>(n_tokens) * kK);
        auto arrival = Upload(std::vector<uint32_t>{0});
        const cuda::TopKExpertsOut top_k{kK, true, ids.get(), weights.get(), arrival.get()};

        // The experts rounding x themselves.
        auto apart = Output<float>(n_out);
        ASSERT_TRUE(cuda::MatMulTopKExperts(router, d_x.get(), logits.get(), n_tokens, top_k, exec).ok());
        uint64_t before = Launches();
        ASSERT_TRUE(cuda::MatMulExpertsGlu(gate, up, ids.get(), d_x.get(), apart.get(), p, exec).ok());
        EXPECT_EQ(Launches() - before, 2u) << "x's rounding, then the experts";

        // The router launch rounding x for them, into the scratch's second
        // half (the experts' own scratch use is the first).
        auto fused = Output<float>(n_out);
        const cuda::ActQ8Out q8 = cuda::ActQ8At(static_cast<uint8_t*>(exec.scratch) + exec.scratch_bytes / 2,
                                                *cuda::ExpertsRounding(gate), n_tokens, cols);
        before = Launches();
        ASSERT_TRUE(cuda::MatMulTopKExperts(router, d_x.get(), logits.get(), n_tokens, top_k, exec, &q8).ok());
        absl::Status s = cuda::MatMulExpertsGlu(gate, up, ids.get(), d_x.get(), fused.get(), p, exec, nullptr, &q8);
        ASSERT_TRUE(s.ok()) << s;
        EXPECT_EQ(Launches() - before, 2u) << "the router, then the experts";
        EXPECT_TRUE(SameBytes(fused.Download(stream()), apart.Download(stream())));

        // Activations of another rule are refused.
        const cuda::ActQ8Out other = cuda::ActQ8At(q8.q, q8.rule == cuda::ActQ8Rule::kPer32 ? cuda::ActQ8Rule::kPer256
                                                                                              : cuda::ActQ8Rule::kPer32,
                                                   n_tokens, cols);
        ExpectInvalidArgument(cuda::MatMulExpertsGlu(gate, up, ids.get(), d_x.get(), fused.get(), p, exec, nullptr, &other),
                              "MatMulExpertsGlu", "rounded by the rule");
      }
    }
  }
}

TEST_F(FusedRouterCudaTest, RefusesWhatOneRouterLaunchCannotDo) {
  constexpr int kExperts = 16, kK = 2;
  constexpr int64_t kCols = 256;
  auto d_f32 = Upload(RandomWeights(GgmlType::kF32, kExperts, kCols, 31));
  auto d_q8 = Upload(RandomWeights(GgmlType::kQ8_0, kExperts, kCols, 32));
  auto d_x = Upload(RandomActivations(17 * kCols, 33));
  auto logits = Output<float>(17 * kExperts);
  auto ids = Output<int32_t>(17 * kK);
  auto weights = Output<float>(17 * kK);
  auto arrival = Upload(std::vector<uint32_t>{0});
  const WeightMatrix router{GgmlType::kF32, d_f32.get(), kExperts, kCols};
  const cuda::Exec exec = Exec(cuda::ActQ8Bytes(17, kCols));
  const cuda::TopKExpertsOut top_k{kK, true, ids.get(), weights.get(), arrival.get()};
  const uint64_t before = Launches();
  ExpectInvalidArgument(cuda::MatMulTopKExperts({GgmlType::kQ8_0, d_q8.get(), kExperts, kCols}, d_x.get(),
                                                logits.get(), 1, top_k, exec),
                        "MatMulTopKExperts", "a router of Q8_0 weights");
  ExpectInvalidArgument(cuda::MatMulTopKExperts(router, d_x.get(), logits.get(), 17, top_k, exec),
                        "MatMulTopKExperts", "17 tokens");
  cuda::TopKExpertsOut no_counter = top_k;
  no_counter.arrival = nullptr;
  ExpectInvalidArgument(cuda::MatMulTopKExperts(router, d_x.get(), logits.get(), 1, no_counter, exec),
                        "MatMulTopKExperts", "arrival is null");
  cuda::TopKExpertsOut too_many = top_k;
  too_many.k = kExperts + 1;
  ExpectInvalidArgument(cuda::MatMulTopKExperts(router, d_x.get(), logits.get(), 1, too_many, exec), "TopKExperts",
                        "k (17)");
  cuda::TopKExpertsOut overlapping = top_k;
  overlapping.weights = logits.get() + 1;
  ExpectInvalidArgument(cuda::MatMulTopKExperts(router, d_x.get(), logits.get(), 1, overlapping, exec),
                        "MatMulTopKExperts", "overlap");
  // 96 columns are not whole 256-element chunks.
  const WeightMatrix narrow{GgmlType::kF32, d_f32.get(), kExperts, 96};
  const cuda::ActQ8Out q8 = cuda::ActQ8At(exec.scratch, cuda::ActQ8Rule::kPer256, 1, 96);
  ExpectInvalidArgument(cuda::MatMulTopKExperts(narrow, d_x.get(), logits.get(), 1, top_k, exec, &q8),
                        "MatMulTopKExperts", "256-element rounding chunks");
  // A shared gate of another type, of two rows, too narrow for a warp of
  // its own, or writing over the logits.
  auto gate_out = Output<float>(17);
  const cuda::SharedGateRow f16_gate{{GgmlType::kF16, d_f32.get(), 1, kCols}, gate_out.get()};
  ExpectInvalidArgument(cuda::MatMulTopKExperts(router, d_x.get(), logits.get(), 1, top_k, exec, nullptr, &f16_gate),
                        "MatMulTopKExperts", "one row of the router's 256 F32 ones");
  const cuda::SharedGateRow two_rows{{GgmlType::kF32, d_f32.get(), 2, kCols}, gate_out.get()};
  ExpectInvalidArgument(cuda::MatMulTopKExperts(router, d_x.get(), logits.get(), 1, top_k, exec, nullptr, &two_rows),
                        "MatMulTopKExperts", "shared gate is 2 rows");
  const WeightMatrix thin{GgmlType::kF32, d_f32.get(), kExperts, 16};
  const cuda::SharedGateRow thin_gate{{GgmlType::kF32, d_f32.get(), 1, 16}, gate_out.get()};
  ExpectInvalidArgument(cuda::MatMulTopKExperts(thin, d_x.get(), logits.get(), 1, top_k, exec, nullptr, &thin_gate),
                        "MatMulTopKExperts", "16 columns (at least 32)");
  const cuda::SharedGateRow onto_logits{{GgmlType::kF32, d_f32.get(), 1, kCols}, logits.get() + 3};
  ExpectInvalidArgument(
      cuda::MatMulTopKExperts(router, d_x.get(), logits.get(), 1, top_k, exec, nullptr, &onto_logits),
      "MatMulTopKExperts", "the shared gate's out overlaps");
  EXPECT_EQ(Launches(), before) << "nothing launched";
  EXPECT_EQ(arrival.Download(stream()), std::vector<uint32_t>{0});
}

}  // namespace
}  // namespace octo
