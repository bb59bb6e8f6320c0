// kernels/cuda/fused.h's MatMulExpertsGroup: the gate and up experts in one
// rounding of x and one decode launch, and the down experts over the 8-bit
// activations the SiLU product wrote while it ran, give each matrix what
// MatMulExperts gives it alone, bit for bit, in fewer launches -- rows of
// one warp and of several (4096 columns), a read-in-place type and staged
// ones, a token and a few. And MatMulExpertsGlu: the gate and up experts
// and their SiLU product (rounded for the down experts) in one launch.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"

#include <gtest/gtest.h>

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

constexpr int kExperts = 4, kChoices = 2, kRows = 24;

class FusedExpertsCudaTest : public testing::CudaOpTest {
 protected:
  // Expert ids for n_tokens tokens, every choice in range.
  std::vector<int32_t> Ids(int n_tokens) {
    std::vector<int32_t> ids(static_cast<size_t>(n_tokens) * kChoices);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((3 * i + 1) % kExperts);
    return ids;
  }
  uint64_t Launches() { return cuda::CurrentApiCounts().launches; }
};

TEST_F(FusedExpertsCudaTest, GateAndUpInOneLaunchGiveEachItsMatMulExpertsBits) {
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0}) {
    for (int64_t cols : {512, 4096}) {
      for (int n_tokens : {1, 3}) {
        SCOPED_TRACE(std::string(GgmlTypeName(type)) + " cols " + std::to_string(cols) + " tokens " +
                     std::to_string(n_tokens));
        auto d_gate = Upload(RandomWeights(type, kExperts * kRows, cols, 3));
        auto d_up = Upload(RandomWeights(type, kExperts * kRows, cols, 4));
        auto d_ids = Upload(Ids(n_tokens));
        auto d_x = Upload(RandomActivations(n_tokens * cols, 5));
        const size_t n_out = static_cast<size_t>(n_tokens) * kChoices * kRows;
        auto gate_alone = Output<float>(n_out), up_alone = Output<float>(n_out);
        auto gate_grouped = Output<float>(n_out), up_grouped = Output<float>(n_out);
        const WeightMatrix ws[] = {{type, d_gate.get(), kExperts * kRows, cols},
                                   {type, d_up.get(), kExperts * kRows, cols}};
        const MatMulExpertsParams p{kExperts, kChoices, n_tokens, false};
        const cuda::Exec exec = Exec(cuda::MatMulExpertsScratchBytes(ws[0], p));

        const uint64_t before = Launches();
        ASSERT_TRUE(cuda::MatMulExperts(ws[0], d_ids.get(), d_x.get(), gate_alone.get(), p, exec).ok());
        ASSERT_TRUE(cuda::MatMulExperts(ws[1], d_ids.get(), d_x.get(), up_alone.get(), p, exec).ok());
        const uint64_t apart = Launches() - before;
        float* const outs[] = {gate_grouped.get(), up_grouped.get()};
        absl::Status s = cuda::MatMulExpertsGroup(ws, d_ids.get(), d_x.get(), outs, p, exec);
        ASSERT_TRUE(s.ok()) << s;
        EXPECT_EQ(Launches() - before - apart, 2u) << "one rounding of x, one decode launch";
        EXPECT_EQ(apart, 4u);
        EXPECT_EQ(gate_grouped.Download(stream()), gate_alone.Download(stream()));
        EXPECT_EQ(up_grouped.Download(stream()), up_alone.Download(stream()));
      }
    }
  }
}

TEST_F(FusedExpertsCudaTest, DownExpertsReadTheRoundingTheSiluProductWrote) {
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0}) {
    for (int n_tokens : {1, 3}) {
      SCOPED_TRACE(std::string(GgmlTypeName(type)) + " tokens " + std::to_string(n_tokens));
      constexpr int64_t kWidth = 1024;  // each choice's hidden row
      const int64_t n = int64_t{n_tokens} * kChoices * kWidth;
      auto d_down = Upload(RandomWeights(type, kExperts * kRows, kWidth, 6));
      auto d_ids = Upload(Ids(n_tokens));
      auto d_gate = Upload(RandomActivations(static_cast<int>(n), 7));
      auto d_up = Upload(RandomActivations(static_cast<int>(n), 8));
      auto hidden = Output<float>(static_cast<size_t>(n));
      const size_t n_out = static_cast<size_t>(n_tokens) * kChoices * kRows;
      auto alone = Output<float>(n_out), fused = Output<float>(n_out);
      const WeightMatrix w{type, d_down.get(), kExperts * kRows, kWidth};
      const MatMulExpertsParams p{kExperts, kChoices, n_tokens, true};
      const cuda::Exec exec = Exec(cuda::MatMulExpertsScratchBytes(w, p));

      uint64_t before = Launches();
      ASSERT_TRUE(cuda::SiluMul(d_gate.get(), d_up.get(), hidden.get(), n, stream()).ok());
      ASSERT_TRUE(cuda::MatMulExperts(w, d_ids.get(), hidden.get(), alone.get(), p, exec).ok());
      EXPECT_EQ(Launches() - before, 3u);
      const std::vector<float> hidden_apart = hidden.Download(stream());

      before = Launches();
      const cuda::ActQ8Out q8 = cuda::ActQ8At(exec.scratch, *cuda::ExpertsRounding(w), n_tokens * kChoices, kWidth);
      ASSERT_TRUE(cuda::SiluMul(d_gate.get(), d_up.get(), hidden.get(), n, stream(), q8).ok());
      float* const outs[] = {fused.get()};
      absl::Status s = cuda::MatMulExpertsGroup({&w, 1}, d_ids.get(), hidden.get(), outs, p, exec, &q8);
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ(Launches() - before, 2u) << "the quantize launch goes";
      EXPECT_EQ(hidden.Download(stream()), hidden_apart);
      EXPECT_EQ(fused.Download(stream()), alone.Download(stream()));
    }
  }
}

// The gate and up experts, their SiLU product and its rounding for the down
// experts in one launch (after x's rounding): the product, its 8-bit
// activations and the down experts' output are those of the three launches
// apart (the group, the rounding SiluMul), and the chunk counters are left
// zeroed.
TEST_F(FusedExpertsCudaTest, GateUpAndTheSiluProductInOneLaunchGiveTheThreeOpsBits) {
  constexpr int64_t kWidth = 512;  // each choice's hidden row: 2 chunks of 256, 16 of 32
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0}) {
    for (int64_t cols : {512, 4096}) {
      for (int n_tokens : {1, 3}) {
        SCOPED_TRACE(absl::StrFormat("%s cols %d tokens %d", GgmlTypeName(type), cols, n_tokens));
        const int n_choices = n_tokens * kChoices;
        std::vector<int32_t> ids = Ids(n_tokens);
        if (n_tokens > 1) ids[3] = kExperts;  // out of range: NaN rows
        auto d_gate = Upload(RandomWeights(type, kExperts * kWidth, cols, 3));
        auto d_up = Upload(RandomWeights(type, kExperts * kWidth, cols, 4));
        auto d_down = Upload(RandomWeights(type, kExperts * kRows, kWidth, 6));
        auto d_ids = Upload(ids);
        auto d_x = Upload(RandomActivations(n_tokens * cols, 5));
        const WeightMatrix gate{type, d_gate.get(), kExperts * kWidth, cols}, up{type, d_up.get(), kExperts * kWidth, cols};
        const WeightMatrix down{type, d_down.get(), kExperts * kRows, kWidth};
        const MatMulExpertsParams shared_x{kExperts, kChoices, n_tokens, false}, per_choice{kExperts, kChoices, n_tokens, true};
        // The down experts' activations at the scratch's front, x's after.
        const size_t front = cuda::ActQ8Bytes(n_choices, kWidth);
        const cuda::Exec exec = Exec(front + cuda::MatMulExpertsScratchBytes(gate, shared_x));
        cuda::Exec after = exec;
        after.scratch = static_cast<uint8_t*>(exec.scratch) + front;
        after.scratch_bytes -= front;
        const cuda::ActQ8Rule rule = *cuda::ExpertsRounding(down);
        auto counters = Upload(std::vector<uint32_t>(static_cast<size_t>(n_choices) * kWidth / cuda::kQ8Chunk, 0));
        cuda::ActQ8Out q8 = cuda::ActQ8At(exec.scratch, rule, n_choices, kWidth);
        q8.arrivals = counters.get();
        auto act = [&] {
          EXPECT_EQ(cudaStreamSynchronize(stream()), cudaSuccess);
          std::vector<uint8_t> bytes(front);
          EXPECT_EQ(cudaMemcpy(bytes.data(), exec.scratch, front, cudaMemcpyDeviceToHost), cudaSuccess);
          return bytes;
        };
        const size_t n_hidden = static_cast<size_t>(n_choices) * kWidth, n_out = static_cast<size_t>(n_choices) * kRows;

        auto g = Output<float>(n_hidden), u = Output<float>(n_hidden), out_apart = Output<float>(n_out);
        uint64_t before = Launches();
        const WeightMatrix gate_up[] = {gate, up};
        float* const gate_up_out[] = {g.get(), u.get()};
        ASSERT_TRUE(cuda::MatMulExpertsGroup(gate_up, d_ids.get(), d_x.get(), gate_up_out, shared_x, after).ok());
        ASSERT_TRUE(cuda::SiluMul(g.get(), u.get(), g.get(), static_cast<int64_t>(n_hidden), stream(), q8).ok());
        const std::vector<uint8_t> act_apart = act();
        float* const down_apart[] = {out_apart.get()};
        ASSERT_TRUE(cuda::MatMulExpertsGroup({&down, 1}, d_ids.get(), g.get(), down_apart, per_choice, exec, &q8).ok());
        EXPECT_EQ(Launches() - before, 4u);

        auto hidden = Output<float>(n_hidden), out_fused = Output<float>(n_out);
        before = Launches();
        absl::Status s = cuda::MatMulExpertsGlu(gate, up, d_ids.get(), d_x.get(), hidden.get(), shared_x, after, &q8);
        ASSERT_TRUE(s.ok()) << s;
        EXPECT_EQ(Launches() - before, 2u) << "x's rounding and one decode launch";
        EXPECT_TRUE(SameBytes(act(), act_apart)) << "the product's rounding is SiluMul's";
        float* const down_fused[] = {out_fused.get()};
        ASSERT_TRUE(cuda::MatMulExpertsGroup({&down, 1}, d_ids.get(), hidden.get(), down_fused, per_choice, exec, &q8).ok());
        EXPECT_TRUE(SameBytes(hidden.Download(stream()), g.Download(stream())));
        EXPECT_TRUE(SameBytes(out_fused.Download(stream()), out_apart.Download(stream())));
        EXPECT_EQ(counters.Download(stream()), std::vector<uint32_t>(counters.size(), 0)) << "left zeroed";

        // Unrounded: the product alone.
        auto plain = Output<float>(n_hidden);
        ASSERT_TRUE(cuda::MatMulExpertsGlu(gate, up, d_ids.get(), d_x.get(), plain.get(), shared_x, after).ok());
        EXPECT_TRUE(SameBytes(plain.Download(stream()), g.Download(stream())));
      }
    }
  }
}

TEST_F(FusedExpertsCudaTest, RefusesStacksItCannotReadAlikeAndAnotherRulesRounding) {
  auto d_a = Upload(RandomWeights(GgmlType::kQ4_K, kExperts * kRows, 512, 3));
  auto d_b = Upload(RandomWeights(GgmlType::kQ8_0, kExperts * kRows, 512, 4));
  auto d_ids = Upload(Ids(1));
  auto d_x = Upload(RandomActivations(512, 5));
  auto out_a = Output<float>(kChoices * kRows), out_b = Output<float>(kChoices * kRows);
  const WeightMatrix ws[] = {{GgmlType::kQ4_K, d_a.get(), kExperts * kRows, 512},
                             {GgmlType::kQ8_0, d_b.get(), kExperts * kRows, 512}};
  const MatMulExpertsParams p{kExperts, kChoices, 1, false};
  const cuda::Exec exec = Exec(cuda::MatMulExpertsScratchBytes(ws[0], p));
  float* const outs[] = {out_a.get(), out_b.get()};
  const uint64_t before = Launches();
  absl::Status s = cuda::MatMulExpertsGroup(ws, d_ids.get(), d_x.get(), outs, p, exec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("differ in type"), std::string::npos) << s;
  // Q4_K reads per-256 activations; per-32 ones are another rule.
  const cuda::ActQ8Out q8 = cuda::ActQ8At(exec.scratch, cuda::ActQ8RuleFor(GgmlType::kQ8_0), 1, 512);
  s = cuda::MatMulExpertsGroup({ws, 1}, d_ids.get(), d_x.get(), {outs, 1}, p, exec, &q8);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("rounded by the rule"), std::string::npos) << s;
  // MatMulExpertsGlu: gate and up of two types; a product whose rows share
  // chunks with no counters.
  s = cuda::MatMulExpertsGlu(ws[0], ws[1], d_ids.get(), d_x.get(), out_a.get(), p, exec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("one type, shape and expert stride"), std::string::npos) << s;
  auto d_wide = Upload(RandomWeights(GgmlType::kQ4_K, kExperts * 256, 512, 7));
  const WeightMatrix wide{GgmlType::kQ4_K, d_wide.get(), kExperts * 256, 512};
  auto out_wide = Output<float>(kChoices * 256);
  const cuda::Exec wide_exec = Exec(cuda::ActQ8Bytes(kChoices, 256) + cuda::MatMulExpertsScratchBytes(wide, p));
  const cuda::ActQ8Out no_counters = cuda::ActQ8At(wide_exec.scratch, cuda::ActQ8Rule::kPer256, kChoices, 256);
  s = cuda::MatMulExpertsGlu(wide, wide, d_ids.get(), d_x.get(), out_wide.get(), p, wide_exec, &no_counters);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("arrivals is null"), std::string::npos) << s;
  EXPECT_EQ(Launches(), before) << "nothing launched";
}

}  // namespace
}  // namespace octo
