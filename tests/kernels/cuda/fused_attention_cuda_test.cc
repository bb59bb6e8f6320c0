// kernels/cuda/fused.h's rounded Attention: the attention blocks also round
// their output for the output projection, which then skips its quantize
// launch -- the attention output, the 8-bit activations and the projection
// are the two launches' bits. Heads that hold whole chunks and heads that
// share one (the chunk rounded by the block of its last head, counted in
// the arrivals, which it leaves zeroed for the next launch), both rules, a
// context in one split and one over three (the value pass's last block
// writes), a token and a few; and qwen3-next's gated output (SigmoidMul)
// in the same launch.
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

constexpr int64_t kWidth = 512;  // n_heads * head_dim
constexpr int64_t kRows = 40;    // the projection's outputs

class FusedAttentionCudaTest : public testing::CudaOpTest {
 protected:
  struct Result {
    std::vector<float> att, projected;
    std::vector<uint8_t> act;
    std::vector<uint32_t> arrivals;  // after the run
    uint64_t launches = 0;
  };

  // Attention of n_tokens queries at first_pos.. (n_heads * head_dim =
  // kWidth) over a cache filled with KvAppend, then the projection of type
  // `type` over its output: fused, the attention rounds and MatMulGroup
  // takes its activations; apart, MatMulGroup rounds itself. `runs` fused
  // runs in a row share one arrivals buffer (a graph replaying them).
  Result Run(GgmlType type, int head_dim, int first_pos, int n_tokens, bool fused, int runs = 1, bool gated = false) {
    const int n_heads = static_cast<int>(kWidth / head_dim), n_kv_heads = n_heads / 2;
    const int kv_dim = n_kv_heads * head_dim, n_ctx = first_pos + n_tokens;
    auto d_k = Upload(RandomActivations(static_cast<size_t>(n_ctx) * kv_dim, 31));
    auto d_v = Upload(RandomActivations(static_cast<size_t>(n_ctx) * kv_dim, 32));
    const KvCacheTypes types{};
    auto keys = Output<uint8_t>(RowBytes(types.k, kv_dim) * n_ctx);
    auto values = Output<uint8_t>(RowBytes(types.v, kv_dim) * n_ctx);
    EXPECT_TRUE(cuda::KvAppend(d_k.get(), d_v.get(), n_ctx, kv_dim, keys.get(), values.get(), 0, types, stream()).ok());
    auto d_q = Upload(RandomActivations(n_tokens * kWidth, 33));
    auto d_gate = Upload(RandomActivations(n_tokens * kWidth, 35));
    auto d_att = Output<float>(n_tokens * kWidth);
    auto d_w = Upload(RandomWeights(type, kRows, kWidth, 34));
    auto d_projected = Output<float>(n_tokens * kRows);
    auto d_arrivals = Upload(std::vector<uint32_t>(n_tokens * kWidth / cuda::kQ8Chunk, 0));
    const WeightMatrix w{type, d_w.get(), kRows, kWidth};
    float* const outs[] = {d_projected.get()};
    const AttentionParams p{.n_tokens = n_tokens, .first_pos = first_pos, .n_heads = n_heads,
                            .n_kv_heads = n_kv_heads, .head_dim = head_dim,
                            .scale = 1.0f / 8, .types = types};
    // The activations at the scratch's front, the records after them (as
    // CudaBackend lays them out).
    const size_t front = cuda::ActQ8Bytes(n_tokens, kWidth);
    const cuda::Exec exec = Exec(front + cuda::AttentionScratchBytes(p));
    cuda::Exec records = exec;
    records.scratch = static_cast<uint8_t*>(exec.scratch) + front;
    records.scratch_bytes -= front;
    cuda::ActQ8Out q8 = cuda::ActQ8At(exec.scratch, cuda::ActQ8RuleFor(type), n_tokens, kWidth);
    q8.arrivals = d_arrivals.get();
    Sync();
    Result r;
    const cuda::ApiCounts before = cuda::CurrentApiCounts();
    for (int i = 0; i < runs; ++i) {
      absl::Status s = fused ? cuda::Attention(d_q.get(), keys.get(), values.get(), d_att.get(), p, records, &q8,
                                               gated ? d_gate.get() : nullptr)
                             : cuda::Attention(d_q.get(), keys.get(), values.get(), d_att.get(), p, records);
      EXPECT_TRUE(s.ok()) << s;
      if (!fused && gated) {
        s = cuda::SigmoidMul(d_gate.get(), d_att.get(), n_tokens * kWidth, stream());
        EXPECT_TRUE(s.ok()) << s;
      }
      s = fused ? cuda::MatMulGroup({&w, 1}, d_att.get(), outs, n_tokens, exec, q8)
                : cuda::MatMulGroup({&w, 1}, d_att.get(), outs, n_tokens, exec);
      EXPECT_TRUE(s.ok()) << s;
    }
    r.launches = (cuda::CurrentApiCounts() - before).launches / runs;
    r.att = d_att.Download(stream());
    r.projected = d_projected.Download(stream());
    r.arrivals = d_arrivals.Download(stream());
    r.act.resize(front);
    EXPECT_EQ(cudaMemcpy(r.act.data(), exec.scratch, front, cudaMemcpyDeviceToHost), cudaSuccess);
    return r;
  }
};

TEST_F(FusedAttentionCudaTest, AttentionRoundingItsOutputGivesTheTwoLaunchesBits) {
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K}) {
    for (int head_dim : {64, 128, 256}) {
      for (int first_pos : {20, 700}) {
        for (int n_tokens : {1, 3}) {
          SCOPED_TRACE(absl::StrFormat("%s head_dim %d first_pos %d tokens %d", GgmlTypeName(type), head_dim,
                                       first_pos, n_tokens));
          const Result apart = Run(type, head_dim, first_pos, n_tokens, false);
          const Result fused = Run(type, head_dim, first_pos, n_tokens, true);
          EXPECT_EQ(fused.launches + 1, apart.launches) << "the quantize launch goes";
          EXPECT_EQ(0, std::memcmp(fused.att.data(), apart.att.data(), fused.att.size() * 4));
          EXPECT_EQ(fused.act, apart.act) << "the attention's rounding is the quantize launch's";
          EXPECT_EQ(0, std::memcmp(fused.projected.data(), apart.projected.data(), fused.projected.size() * 4));
          EXPECT_EQ(fused.arrivals, std::vector<uint32_t>(fused.arrivals.size(), 0u)) << "left zeroed";
        }
      }
    }
  }
}

// The gated output (qwen3-next): attention, SigmoidMul and the rounding in
// one launch, the three launches' bits.
TEST_F(FusedAttentionCudaTest, TheGatedOutputInTheSameLaunchGivesSigmoidMulsBits) {
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K}) {
    for (int first_pos : {20, 700}) {
      SCOPED_TRACE(absl::StrFormat("%s first_pos %d", GgmlTypeName(type), first_pos));
      const Result apart = Run(type, 128, first_pos, 2, false, 1, true);
      const Result fused = Run(type, 128, first_pos, 2, true, 1, true);
      EXPECT_EQ(fused.launches + 2, apart.launches) << "the quantize and SigmoidMul launches go";
      EXPECT_EQ(0, std::memcmp(fused.att.data(), apart.att.data(), fused.att.size() * 4));
      EXPECT_EQ(fused.act, apart.act);
      EXPECT_EQ(0, std::memcmp(fused.projected.data(), apart.projected.data(), fused.projected.size() * 4));
    }
  }
}

// Heads of 128 share a 256-element chunk: three launches in a row on one
// arrivals buffer (what a graph replays every token) give the first's bits.
TEST_F(FusedAttentionCudaTest, TheCountersServeLaunchAfterLaunch) {
  const Result once = Run(GgmlType::kQ4_K, 128, 300, 2, true);
  const Result thrice = Run(GgmlType::kQ4_K, 128, 300, 2, true, 3);
  EXPECT_EQ(thrice.act, once.act);
  EXPECT_EQ(0, std::memcmp(thrice.projected.data(), once.projected.data(), once.projected.size() * 4));
  EXPECT_EQ(thrice.arrivals, std::vector<uint32_t>(thrice.arrivals.size(), 0u));
}

TEST_F(FusedAttentionCudaTest, RefusesHeadsTheRoundingCannotTile) {
  auto d_x = Upload(RandomActivations(3 * 96, 1));
  auto d_out = Output<float>(3 * 96);
  auto d_cache = Upload(std::vector<uint8_t>(4096, 0));
  const cuda::Exec exec = Exec(1 << 16);
  const cuda::ActQ8Out per256 = cuda::ActQ8At(exec.scratch, cuda::ActQ8Rule::kPer256, 1, 768);
  // 3 heads of 96 (a 288-wide row: not whole chunks of 32), then 8 of 96
  // (768: whole chunks, but a head of 96 neither holds nor tiles 256).
  AttentionParams p{.n_tokens = 1, .first_pos = 0, .n_heads = 3, .n_kv_heads = 1, .head_dim = 96, .scale = 0.1f, .types = {}};
  testing::ExpectInvalidArgument(
      cuda::Attention(d_x.get(), d_cache.get(), d_cache.get(), d_out.get(), p, exec, &per256), "Attention",
      "rounding chunks");
  p.n_heads = 8;
  testing::ExpectInvalidArgument(
      cuda::Attention(d_x.get(), d_cache.get(), d_cache.get(), d_out.get(), p, exec, &per256), "Attention",
      "neither hold");
  // Heads of 64 share a 256-element chunk: the counters are needed.
  p.head_dim = 64;
  p.n_heads = 4;
  testing::ExpectInvalidArgument(
      cuda::Attention(d_x.get(), d_cache.get(), d_cache.get(), d_out.get(), p, exec, &per256), "Attention",
      "arrivals is null");
}

}  // namespace
}  // namespace octo
