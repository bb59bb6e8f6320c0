// A MoE layer's shared expert (qwen2moe's, qwen3-next's) in the routed
// experts' launches (kernels/cuda/fused.h): its gate and up in
// MatMulExpertsGlu's launch (SharedExpertGlu) give what MatMulGlu gives
// them, and its down in the combining down experts' launch
// (SharedExpertDown in MatMulExpertsCombineNorm) what MatMulGroup over the
// same rounding gives it -- outputs and roundings bit for bit, the routed
// experts' too, in fewer launches: shared rows narrower and wider than the
// routed experts', a staged type and 16-byte unit ones, a token and several,
// an expert id out of range (NaN routed rows; the shared rows stay whole).
// What it cannot take, it refuses without launching.
#include <algorithm>
#include <cstdint>
#include <cstring>
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
constexpr int64_t kWidth = 512;  // a routed expert's hidden row
constexpr float kEps = 1e-5f;

std::vector<int32_t> Ids(int n_tokens) {
  std::vector<int32_t> ids(static_cast<size_t>(n_tokens) * kChoices);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((2 * i + 1) % kExperts);
  if (n_tokens > 1) ids[4] = kExperts;  // out of range: NaN routed rows
  return ids;
}

class SharedExpertCudaTest : public testing::CudaOpTest {
 protected:
  uint64_t Launches() { return cuda::CurrentApiCounts().launches; }
  std::vector<uint8_t> Bytes(const void* device, size_t n) {
    EXPECT_EQ(cudaStreamSynchronize(stream()), cudaSuccess);
    std::vector<uint8_t> bytes(n);
    EXPECT_EQ(cudaMemcpy(bytes.data(), device, n, cudaMemcpyDeviceToHost), cudaSuccess);
    return bytes;
  }
};

TEST_F(SharedExpertCudaTest, TheSharedGateAndUpInTheExpertsLaunchGiveMatMulGlusBits) {
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0, GgmlType::kQ6_K}) {
    for (int64_t cols : {512, 2048}) {
      for (int64_t shared_rows : {256, 1024}) {
        for (int n_tokens : {1, 3}) {
          SCOPED_TRACE(absl::StrFormat("%s cols %d shared rows %d tokens %d", GgmlTypeName(type), cols, shared_rows,
                                       n_tokens));
          const int n_choices = n_tokens * kChoices;
          auto d_gate = Upload(RandomWeights(type, kExperts * kWidth, cols, 3));
          auto d_up = Upload(RandomWeights(type, kExperts * kWidth, cols, 4));
          auto d_shared_gate = Upload(RandomWeights(type, shared_rows, cols, 5));
          auto d_shared_up = Upload(RandomWeights(type, shared_rows, cols, 6));
          auto d_ids = Upload(Ids(n_tokens));
          auto d_x = Upload(RandomActivations(n_tokens * cols, 7));
          const WeightMatrix gate{type, d_gate.get(), kExperts * kWidth, cols};
          const WeightMatrix up{type, d_up.get(), kExperts * kWidth, cols};
          const WeightMatrix shared_gate{type, d_shared_gate.get(), shared_rows, cols};
          const WeightMatrix shared_up{type, d_shared_up.get(), shared_rows, cols};
          const MatMulExpertsParams p{kExperts, kChoices, n_tokens, false};
          // The scratch: the routed rows' rounding, the shared rows', then x's.
          const size_t front = cuda::ActQ8Bytes(n_choices, kWidth), shared_front = cuda::ActQ8Bytes(n_tokens, shared_rows);
          const cuda::Exec exec =
              Exec(front + shared_front +
                   std::max(cuda::MatMulExpertsScratchBytes(gate, p), cuda::MatMulScratchBytes(shared_gate, n_tokens)));
          cuda::Exec after = exec;
          after.scratch = static_cast<uint8_t*>(exec.scratch) + front + shared_front;
          after.scratch_bytes -= front + shared_front;
          const cuda::ActQ8Rule rule = *cuda::ExpertsRounding(gate);
          auto counters = Upload(std::vector<uint32_t>(
              static_cast<size_t>(n_choices) * kWidth / cuda::kQ8Chunk + n_tokens * shared_rows / cuda::kQ8Chunk, 0));
          cuda::ActQ8Out q8 = cuda::ActQ8At(exec.scratch, rule, n_choices, kWidth);
          q8.arrivals = counters.get();
          cuda::ActQ8Out shared_q8 =
              cuda::ActQ8At(static_cast<uint8_t*>(exec.scratch) + front, rule, n_tokens, shared_rows);
          shared_q8.arrivals = counters.get() + n_choices * kWidth / cuda::kQ8Chunk;
          const size_t n_out = static_cast<size_t>(n_choices) * kWidth, n_shared = n_tokens * shared_rows;

          auto out_apart = Output<float>(n_out), shared_apart = Output<float>(n_shared);
          ASSERT_EQ(cudaMemset(exec.scratch, 0, front + shared_front), cudaSuccess);  // padding alike
          uint64_t before = Launches();
          ASSERT_TRUE(cuda::MatMulExpertsGlu(gate, up, d_ids.get(), d_x.get(), out_apart.get(), p, after, &q8).ok());
          absl::Status s = cuda::MatMulGlu(shared_gate, shared_up, d_x.get(), shared_apart.get(), n_tokens, after,
                                           nullptr, &shared_q8);
          ASSERT_TRUE(s.ok()) << s;
          EXPECT_EQ(Launches() - before, 4u) << "two roundings of x, two decode launches";
          const std::vector<uint8_t> act_apart = Bytes(exec.scratch, front + shared_front);

          ASSERT_EQ(cudaMemset(exec.scratch, 0, front + shared_front), cudaSuccess);
          auto out_fused = Output<float>(n_out), shared_fused = Output<float>(n_shared);
          const cuda::SharedExpertGlu shared{shared_gate, shared_up, shared_fused.get(), &shared_q8};
          before = Launches();
          s = cuda::MatMulExpertsGlu(gate, up, d_ids.get(), d_x.get(), out_fused.get(), p, after, &q8, nullptr, &shared);
          ASSERT_TRUE(s.ok()) << s;
          EXPECT_EQ(Launches() - before, 2u) << "one rounding of x, one decode launch";
          EXPECT_TRUE(SameBytes(Bytes(exec.scratch, front + shared_front), act_apart)) << "both roundings";
          EXPECT_TRUE(SameBytes(out_fused.Download(stream()), out_apart.Download(stream()))) << "the routed rows";
          EXPECT_TRUE(SameBytes(shared_fused.Download(stream()), shared_apart.Download(stream()))) << "the shared rows";
          EXPECT_EQ(counters.Download(stream()), std::vector<uint32_t>(counters.size(), 0)) << "left zeroed";
        }
      }
    }
  }
}

TEST_F(SharedExpertCudaTest, TheSharedDownInTheCombiningLaunchGivesMatMulsBits) {
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0, GgmlType::kQ6_K}) {
    for (int dim : {256, 1024}) {
      for (int64_t shared_width : {512, 1536}) {
        for (int n_tokens : {1, 2, 4}) {
          const bool gated = n_tokens != 2;
          SCOPED_TRACE(absl::StrFormat("%s dim %d shared width %d tokens %d", GgmlTypeName(type), dim, shared_width,
                                       n_tokens));
          const int n_choices = n_tokens * kChoices;
          const int64_t n_hidden = n_choices * kWidth, n_shared_hidden = n_tokens * shared_width,
                        n = int64_t{n_tokens} * dim;
          auto d_down = Upload(RandomWeights(type, int64_t{kExperts} * dim, kWidth, 11));
          auto d_shared_down = Upload(RandomWeights(type, dim, shared_width, 12));
          auto d_ids = Upload(Ids(n_tokens));
          auto d_hidden = Upload(RandomActivations(n_hidden, 13));
          auto d_shared_hidden = Upload(RandomActivations(n_shared_hidden, 14));
          auto d_weights = Upload(RandomActivations(n_choices, 15));
          auto d_gate_logits = Upload(RandomActivations(n_tokens, 16));
          const std::vector<float> residual = RandomActivations(n, 17);
          auto d_norm_weight = Upload(RandomActivations(dim, 18));
          const WeightMatrix down{type, d_down.get(), int64_t{kExperts} * dim, kWidth};
          const WeightMatrix shared_down{type, d_shared_down.get(), dim, shared_width};
          const MatMulExpertsParams p{kExperts, kChoices, n_tokens, true};
          const cuda::ActQ8Rule rule = *cuda::ExpertsRounding(down);
          const size_t front = cuda::ActQ8Bytes(n_choices, kWidth), shared_front = cuda::ActQ8Bytes(n_tokens, shared_width);
          const size_t norm_bytes = cuda::ActQ8Bytes(n_tokens, dim);
          const cuda::Exec exec = Exec(std::max(front + shared_front, norm_bytes));
          const cuda::ActQ8Out q8 = cuda::ActQ8At(exec.scratch, rule, n_choices, kWidth);
          const cuda::ActQ8Out shared_q8 =
              cuda::ActQ8At(static_cast<uint8_t*>(exec.scratch) + front, rule, n_tokens, shared_width);
          const cuda::ActQ8Out round_norm = cuda::ActQ8At(exec.scratch, cuda::ActQ8Rule::kPer32, n_tokens, dim);
          auto d_counter = Upload(std::vector<uint32_t>(1, 0));
          // Each pass: the two hidden rows rounded (a SiluMul of the row and
          // ones: the row itself), then the downs, the combine and the norm.
          auto d_ones = Upload(std::vector<float>(static_cast<size_t>(std::max(n_hidden, n_shared_hidden)), 1.0f));
          struct Result {
            std::vector<float> rows, shared, residual, normed;
            std::vector<uint8_t> act;
            uint64_t launches;
          };
          auto run = [&](bool fused) {
            auto d_rows = Output<float>(static_cast<size_t>(n_choices) * dim);
            auto d_shared = Output<float>(static_cast<size_t>(n));
            auto d_residual = Upload(residual);
            auto d_normed = Output<float>(static_cast<size_t>(n));
            auto silu_hidden = Output<float>(static_cast<size_t>(n_hidden));
            auto silu_shared = Output<float>(static_cast<size_t>(n_shared_hidden));
            EXPECT_TRUE(cuda::SiluMul(d_hidden.get(), d_ones.get(), silu_hidden.get(), n_hidden, stream(), q8).ok());
            EXPECT_TRUE(
                cuda::SiluMul(d_shared_hidden.get(), d_ones.get(), silu_shared.get(), n_shared_hidden, stream(), shared_q8)
                    .ok());
            const MoeCombineParams combine{.expert_out = d_rows.get(),
                                           .weights = d_weights.get(),
                                           .shared = d_shared.get(),
                                           .shared_gate_logits = gated ? d_gate_logits.get() : nullptr,
                                           .out = d_normed.get(),
                                           .n_rows = n_tokens,
                                           .k = kChoices,
                                           .dim = dim};
            const uint64_t before = Launches();
            absl::Status s;
            if (fused) {
              const cuda::CombineAfterExperts tail{combine, d_residual.get(), d_norm_weight.get(), kEps,
                                                   d_counter.get()};
              const cuda::SharedExpertDown shared{shared_down, silu_shared.get(), shared_q8, d_shared.get()};
              s = cuda::MatMulExpertsCombineNorm(down, d_ids.get(), silu_hidden.get(), d_rows.get(), p, tail, exec, q8,
                                                 &round_norm, &shared);
            } else {
              float* const outs[] = {d_rows.get()};
              float* const shared_outs[] = {d_shared.get()};
              s = cuda::MatMulExpertsGroup({&down, 1}, d_ids.get(), silu_hidden.get(), outs, p, exec, &q8);
              if (s.ok()) s = cuda::MatMulGroup({&shared_down, 1}, silu_shared.get(), shared_outs, n_tokens, exec, shared_q8);
              if (s.ok()) {
                s = cuda::CombineAddRmsNorm(combine, d_residual.get(), d_norm_weight.get(), kEps, stream(), &round_norm);
              }
            }
            EXPECT_TRUE(s.ok()) << s;
            Result r;
            r.launches = Launches() - before;
            r.rows = d_rows.Download(stream());
            r.shared = d_shared.Download(stream());
            r.residual = d_residual.Download(stream());
            r.normed = d_normed.Download(stream());
            r.act = Bytes(exec.scratch, norm_bytes);
            return r;
          };
          const Result apart = run(false), fused = run(true);
          EXPECT_EQ(apart.launches, 3u);
          EXPECT_EQ(fused.launches, 1u) << "both downs, the combine and the norm in one launch";
          EXPECT_TRUE(SameBytes(fused.rows, apart.rows)) << "the routed rows";
          EXPECT_TRUE(SameBytes(fused.shared, apart.shared)) << "the shared rows";
          EXPECT_TRUE(SameBytes(fused.residual, apart.residual)) << "the residual";
          EXPECT_TRUE(SameBytes(fused.normed, apart.normed)) << "the norm's output";
          EXPECT_TRUE(SameBytes(fused.act, apart.act)) << "the norm's rounding";
          EXPECT_EQ(d_counter.Download(stream())[0], 0u);
        }
      }
    }
  }
}

TEST_F(SharedExpertCudaTest, RefusesASharedExpertItCannotReadAlikeWithoutLaunching) {
  constexpr int64_t kCols = 512, kSharedRows = 256;
  constexpr int kDim = 256;
  const GgmlType type = GgmlType::kQ4_K;
  auto d_gate = Upload(RandomWeights(type, kExperts * kWidth, kCols, 3));
  auto d_shared = Upload(RandomWeights(type, kSharedRows, kCols, 4));
  auto d_other = Upload(RandomWeights(GgmlType::kQ8_0, kSharedRows, kCols, 5));
  auto d_down = Upload(RandomWeights(type, int64_t{kExperts} * kDim, kWidth, 6));
  auto d_shared_down = Upload(RandomWeights(type, kDim, kSharedRows, 7));
  auto d_ids = Upload(Ids(1));
  auto d_x = Upload(RandomActivations(kCols, 8));
  auto d_hidden = Upload(RandomActivations(kChoices * kWidth, 9));
  auto d_shared_hidden = Upload(RandomActivations(kSharedRows, 10));
  auto d_weights = Upload(RandomActivations(kChoices, 11));
  auto d_residual = Upload(RandomActivations(kDim, 12));
  auto d_norm_weight = Upload(RandomActivations(kDim, 13));
  auto out = Output<float>(kChoices * kWidth), shared_out = Output<float>(kSharedRows);
  auto rows = Output<float>(kChoices * kDim), shared_rows = Output<float>(kDim), normed = Output<float>(kDim);
  auto d_counter = Upload(std::vector<uint32_t>(1, 0));
  const WeightMatrix gate{type, d_gate.get(), kExperts * kWidth, kCols};
  const WeightMatrix shared_gate{type, d_shared.get(), kSharedRows, kCols};
  const WeightMatrix other{GgmlType::kQ8_0, d_other.get(), kSharedRows, kCols};
  const WeightMatrix down{type, d_down.get(), int64_t{kExperts} * kDim, kWidth};
  const WeightMatrix shared_down{type, d_shared_down.get(), kDim, kSharedRows};
  const MatMulExpertsParams shared_x{kExperts, kChoices, 1, false}, per_choice{kExperts, kChoices, 1, true};
  const cuda::Exec exec = Exec(1 << 20);
  const cuda::ActQ8Rule rule = *cuda::ExpertsRounding(gate);
  const cuda::ActQ8Out q8 = cuda::ActQ8At(exec.scratch, rule, kChoices, kWidth);
  const cuda::ActQ8Out shared_q8 = cuda::ActQ8At(static_cast<uint8_t*>(exec.scratch) + (1 << 18), rule, 1, kSharedRows);
  auto refused = [&](const absl::Status& s, const char* what) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << what << ": " << s;
  };
  const uint64_t before = Launches();
  const cuda::SharedExpertGlu other_type{other, other, shared_out.get(), nullptr};
  refused(cuda::MatMulExpertsGlu(gate, gate, d_ids.get(), d_x.get(), out.get(), shared_x, exec, nullptr, nullptr,
                                 &other_type),
          "a shared gate of another type");
  const cuda::SharedExpertGlu overlapping{shared_gate, shared_gate, out.get(), nullptr};
  refused(cuda::MatMulExpertsGlu(gate, gate, d_ids.get(), d_x.get(), out.get(), shared_x, exec, nullptr, nullptr,
                                 &overlapping),
          "a shared out over the routed experts'");
  const MoeCombineParams combine{.expert_out = rows.get(),
                                 .weights = d_weights.get(),
                                 .shared = shared_rows.get(),
                                 .out = normed.get(),
                                 .n_rows = 1,
                                 .k = kChoices,
                                 .dim = kDim};
  const cuda::CombineAfterExperts tail{combine, d_residual.get(), d_norm_weight.get(), kEps, d_counter.get()};
  const cuda::SharedExpertDown elsewhere{shared_down, d_shared_hidden.get(), shared_q8, normed.get()};
  refused(cuda::MatMulExpertsCombineNorm(down, d_ids.get(), d_hidden.get(), rows.get(), per_choice, tail, exec, q8,
                                         nullptr, &elsewhere),
          "a shared down the combine does not read");
  const WeightMatrix narrow{type, d_shared_down.get(), kDim / 2, kSharedRows};
  const cuda::SharedExpertDown short_rows{narrow, d_shared_hidden.get(), shared_q8, shared_rows.get()};
  refused(cuda::MatMulExpertsCombineNorm(down, d_ids.get(), d_hidden.get(), rows.get(), per_choice, tail, exec, q8,
                                         nullptr, &short_rows),
          "a shared down of fewer rows than the combine's");
  EXPECT_EQ(Launches(), before) << "nothing launched";
}

}  // namespace
}  // namespace octo
