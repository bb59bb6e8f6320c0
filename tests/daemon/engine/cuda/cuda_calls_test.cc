// What a decode token asks of the CUDA runtime, through the real CUDA backend
// (the executor in CI): the counts grow by the same amount per added layer
// -- what lets gpu_bench's profile scale a tiny model's counts to a full
// model's -- and a decode step in steady state allocates and frees nothing.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/engine/backend_setup.h"
#include "storage/decompose.h"
#include "tests/bench/api_profile.h"
#include "tests/preset_param_name.h"
#include "tests/storage/test_models.h"
#include "tests/temp_dir.h"

namespace octo::testing {
namespace {

class CudaDecodeCalls : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (UsableCudaDevices() == 0) GTEST_SKIP() << "no CUDA device";
  }

  // The family's model at `layers` layers, decoded `steps` tokens. Q4_K
  // throughout, so every layer asks the same (Q4_K_M's Q6_K attn_v layers
  // take one decode launch more: MatMulGroup decodes once per type).
  bench::DecodeCalls Measure(uint32_t layers, int steps = 3, bool graphs = false, bool candidates = true,
                             int prompt = 8) {
    const std::string gguf = tmp_.Path(absl::StrCat(layers, ".gguf")), dir = tmp_.Path(absl::StrCat(layers));
    if (!std::filesystem::exists(dir)) {
      GenerateModel(gguf, GetParam(), "Q4_K", [&](ModelShape& s) { s.n_layers = layers; });
      EXPECT_TRUE(Decompose(gguf, dir, DecomposeOptions{}).ok());
    }
    absl::StatusOr<bench::DecodeCalls> calls =
        bench::MeasureDecodeCalls(dir, 0, 1, steps, graphs, candidates, prompt);
    EXPECT_TRUE(calls.ok()) << calls.status();
    return calls.ok() ? *calls : bench::DecodeCalls{};
  }

  TempDir tmp_;
};

TEST_P(CudaDecodeCalls, EachLayerAddsTheSameCallsAndAStepAllocatesNothing) {
  const bench::DecodeCalls two = Measure(2), four = Measure(4), six = Measure(6);
  ASSERT_EQ(six.layers, 6u);
  for (const bench::DecodeCalls* c : {&two, &four, &six}) {
    EXPECT_GT(c->counted.launches, 0u);
    EXPECT_GE(c->counted.host_calls, c->counted.launches) << "a launch is a host call";
    EXPECT_EQ(c->counted.allocations, 0u) << c->layers << " layers: a decode step allocates device memory";
    EXPECT_EQ(c->counted.frees, 0u) << c->layers << " layers";
    EXPECT_EQ(c->counted.pageable_copies, 0u) << c->layers << " layers: host data goes through the pinned stage";
    // The embedding lookup runs on the device: a token uploads its id and
    // position (8 bytes), not its embedding row (dim floats).
    EXPECT_EQ(c->counted.h2d_bytes, 8u * c->steps) << c->layers << " layers";
  }
  // Per step: the launches and host calls of layers 3-4 are those of 5-6.
  EXPECT_EQ(four.counted.launches - two.counted.launches, six.counted.launches - four.counted.launches);
  EXPECT_EQ(four.counted.host_calls - two.counted.host_calls, six.counted.host_calls - four.counted.host_calls);
  EXPECT_EQ(four.counted.blocking_waits - two.counted.blocking_waits,
            six.counted.blocking_waits - four.counted.blocking_waits);

  // The profile line states the per-layer launches and scales the rest.
  absl::StatusOr<std::string> line = bench::ProfileLine("m", two, four, 32);
  ASSERT_TRUE(line.ok()) << line.status();
  const double per_layer = static_cast<double>(four.counted.launches - two.counted.launches) / 2 / two.steps;
  EXPECT_NE(line->find(absl::StrFormat("launches/layer=%.1f ", per_layer)), std::string::npos) << *line;
  EXPECT_NE(line->find("graph=no"), std::string::npos) << *line;
  std::printf("%s (%s)\n", line->c_str(), GetParam());
  EXPECT_FALSE(bench::ProfileLine("m", four, two, 32).ok()) << "fewer layers second";
  // A context within one attention split: a llama layer in 5 launches --
  // q, k, v's decode turning q's and k's heads and appending k's and v's
  // to the caches in its heads' last blocks (1: fused.h's
  // MatMulGroupRopeAppend), attention rounding for wo (1), wo adding into
  // the residual with the FFN norm in its last block, rounding for gate and
  // up (1: MatMulAddRmsNorm), gate, up and their SiLU product rounding for
  // down (1), down with the next layer's attention norm, rounding for q, k,
  // v (1); qwen3 the same, its q and k norms in the heads' tails; qwen2
  // too, its q, k and v biases in their decode launch.
  const std::string family = GetParam();
  if (family == "tiny" || family == "tiny-qwen3" || family == "tiny-qwen2") {
    EXPECT_LE(per_layer, 5.0);
  }
  // A MoE layer: the attention half as above (3, the FFN norm in wo's
  // launch), the router with its top-k and x rounded for the experts (1:
  // fused.h's MatMulTopKExperts), the gate and up experts with their SiLU
  // product rounded for the down experts (1), the down experts with the
  // weighted sum and the next attention norm in their last block, rounding
  // for q, k and v (1: fused.h's MatMulExpertsCombineNorm): 6.
  if (family == "tiny-qwen3moe") {
    EXPECT_LE(per_layer, 6.0);
  }
  // The hybrid: DeltaNet and gated attention layers, each with that MoE
  // FFN (the router's launch as above, the shared expert's gate row in it:
  // fused.h's SharedGateRow) and its FFN norm in the output projection's
  // launch, a DeltaNet layer's conv in its delta rule's launch (fused.h's
  // DeltaNetConvRule), an attention layer's gated query split in the q, k
  // and v launch's head tails with RoPE and the append; the shared expert's
  // gate and up in the routed experts' launch, its down in the down
  // experts' launch, which combines and norms (fused.h's SharedExpertGlu,
  // SharedExpertDown): 6.5 a layer on average.
  if (family == "tiny-qwen3next") {
    EXPECT_LE(per_layer, 6.5);
  }
}

// Past one attention split (a 300-token prompt: the caches hold 512
// positions) attention takes its second launch, the value pass, which rounds
// for wo then: a llama or qwen3 layer in 6 launches, within the 10,
// and an 8B token (32 layers) within its 330.
TEST_P(CudaDecodeCalls, PastOneAttentionSplitALayerTakesOneLaunchMore) {
  const bench::DecodeCalls two = Measure(2, 2, false, true, 300), four = Measure(4, 2, false, true, 300);
  const double short_per_layer = [&] {
    const bench::DecodeCalls a = Measure(2), b = Measure(4);
    return static_cast<double>(b.counted.launches - a.counted.launches) / 2 / a.steps;
  }();
  const double per_layer = static_cast<double>(four.counted.launches - two.counted.launches) / 2 / two.steps;
  absl::StatusOr<std::string> line = bench::ProfileLine("m", two, four, 32);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_GT(four.context, kAttentionSplit);
  EXPECT_NE(line->find(absl::StrCat("context=", four.context)), std::string::npos) << *line;
  std::printf("%s (%s)\n", line->c_str(), GetParam());
  const std::string family = GetParam();
  // Every attention layer takes the one launch more (a hybrid's every
  // other layer).
  const double attention_share = family == "tiny-qwen3next" ? 0.5 : 1.0;
  EXPECT_EQ(per_layer, short_per_layer + attention_share);
  if (family == "tiny" || family == "tiny-qwen3" || family == "tiny-qwen2") {
    EXPECT_LE(per_layer, 6.0);
    const double outside = static_cast<double>(two.counted.launches) / two.steps - 2 * per_layer;
    EXPECT_LE(outside + 32 * per_layer, 330.0);
  }
}

// With CUDA graphs on, a decode token is one graph launch: its host calls
// do not grow with the layers, and stay within the 8 (the graph
// launch, the launch-error check, the stream wait).
TEST_P(CudaDecodeCalls, AGraphedDecodeTokenIsOneGraphLaunch) {
  // Within one attention split and past it (attention's two launches).
  const bench::DecodeCalls four = Measure(4, 3, true), six = Measure(6, 3, true);
  const bench::DecodeCalls long_four = Measure(4, 3, true, true, 300);
  for (const bench::DecodeCalls* c : {&four, &six, &long_four}) {
    SCOPED_TRACE(absl::StrCat(c->layers, " layers, context ", c->context));
    EXPECT_EQ(c->counted.graph_launches, static_cast<uint64_t>(c->steps));
    EXPECT_EQ(c->counted.graph_captures, 0u) << "captured before the counted steps";
    EXPECT_EQ(c->counted.launches, 0u);
    EXPECT_LE(c->counted.host_calls, 8u * c->steps);
    EXPECT_EQ(c->counted.allocations, 0u);
    // The token's id and position go in by a copy node of the graph, from
    // the pinned stage the host wrote: no copy call of its own.
    EXPECT_EQ(c->counted.h2d_bytes, 0u);
  }
  EXPECT_EQ(four.counted.host_calls, six.counted.host_calls) << "a replay's calls do not grow with the layers";
  const bench::DecodeCalls two = Measure(2), eager_four = Measure(4);
  absl::StatusOr<std::string> line = bench::ProfileLine("m", two, eager_four, 32, &four);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_NE(line->find("graph=yes"), std::string::npos) << *line;
  std::printf("%s (%s)\n", line->c_str(), GetParam());
}

// A greedy decode token brings back its logits row reduced to the
// candidates (one TopLogitsRow: 536 bytes, whatever the vocabulary), where
// the whole row is 4 bytes per token of the vocabulary. (Counted launch by
// launch: a graph's copy node is not a call of its own.)
TEST_P(CudaDecodeCalls, AGreedyTokenBringsBackItsCandidatesNotItsRow) {
  const bench::DecodeCalls whole = Measure(2, 3, false, /*candidates=*/false);
  const uint64_t vocab = FindPreset(GetParam())->vocab_size;
  EXPECT_EQ(whole.counted.d2h_bytes, 4 * vocab * whole.steps);
  const bench::DecodeCalls reduced = Measure(2);
  EXPECT_EQ(reduced.counted.d2h_bytes, sizeof(TopLogitsRow) * reduced.steps);
  absl::StatusOr<std::string> line = bench::ProfileLine("m", Measure(2), Measure(4), 32);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_NE(line->find(absl::StrFormat("d2h-bytes/token=%d", sizeof(TopLogitsRow))), std::string::npos) << *line;
  std::printf("d2h bytes per decode token (%s): whole row %llu, candidates %zu\n", GetParam(),
              static_cast<unsigned long long>(4 * vocab), sizeof(TopLogitsRow));
}

// Every layer streamed through the default staging buffers: no pageable
// byte, no blocking wait for a streamed layer (beyond the resident token's),
// and two copies queued behind every layer the pass acquires.
TEST_P(CudaDecodeCalls, AStreamedLayerIsCopiedAheadWithoutBlocking) {
  const bench::DecodeCalls resident = Measure(6);
  absl::StatusOr<bench::StreamedCalls> streamed = bench::MeasureStreamedCalls(tmp_.Path("6"), 0, resident.steps);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(streamed->staging_buffers, kDefaultStagingBuffers);
  EXPECT_EQ(streamed->acquires, 6u * resident.steps);
  EXPECT_EQ(streamed->counted.pageable_bytes, 0u);
  EXPECT_GE(streamed->min_copies_ahead, kDefaultStagingBuffers - 1);
  EXPECT_EQ(streamed->counted.blocking_waits, resident.counted.blocking_waits);
  EXPECT_GT(streamed->counted.h2d_bytes, resident.counted.h2d_bytes) << "the layers were copied in";
  absl::StatusOr<std::string> line = bench::StreamedProfileLine("m", resident, *streamed);
  ASSERT_TRUE(line.ok()) << line.status();
  std::printf("%s (%s)\n", line->c_str(), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Families, CudaDecodeCalls,
                         ::testing::Values("tiny", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3moe", "tiny-qwen3next"),
                         PresetParamName());

}  // namespace
}  // namespace octo::testing
