// cuda::MatMulGroupRopeAppend (fused.h): the q, k and v projections' decode
// launch turning q's and k's heads and appending k's and v's to the caches
// in the tails of each head's last block leaves what MatMulGroupBias then
// RopeQKAppend leave -- q, k, v and both caches, bit for bit -- in one
// launch fewer: q, k and v of one type and of two (Q4_K_M's Q6_K v: two
// launches, each with its heads' tails), with and without biases and
// qwen3's head norms, normal and neox rotation, a partial one, a block
// holding several heads (head_dim 8) and heads of several blocks, 1 to 16
// tokens, every cache type, the position read on the device, and
// qwen3-next's gated query split in the tails (SplitGatedQuery's launch
// goes too). The counters
// are left zero: a second launch gives the same bits.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"

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
constexpr int kFirst = 5;  // cache rows before the new ones

struct Case {
  GgmlType qk_type, v_type;
  int heads, kv_heads, head_dim, rope_dim;
  bool neox, biases, norms;
  int n_tokens;
  KvCacheTypes types;
  bool position_on_device = false;
  bool gated = false;  // q's matrix gives each head's queries then its gate (qwen3-next)
};

std::string Name(const Case& c) {
  return absl::StrFormat(
      "%s/%s heads %d/%d of %d rope %d neox %d biases %d norms %d tokens %d cache %s/%s dev-pos %d gated %d",
      GgmlTypeName(c.qk_type), GgmlTypeName(c.v_type), c.heads, c.kv_heads, c.head_dim, c.rope_dim, c.neox, c.biases,
      c.norms, c.n_tokens, GgmlTypeName(c.types.k), GgmlTypeName(c.types.v), c.position_on_device, c.gated);
}

class FusedQkvRopeCudaTest : public testing::CudaOpTest {
 protected:
  struct Result {
    std::vector<float> q, k, v, qg, gate;
    std::vector<uint8_t> keys, values;
    uint64_t launches = 0;
    std::vector<uint32_t> counters;
  };

  // The projections of x into q, k and v, then RoPE (and the head norms) and
  // the append: in one launch per weight type, `launches` times over with
  // the same counters (fused), or as MatMulGroupBias then RopeQKAppend.
  Result Run(const Case& c, bool fused, int launches = 1) {
    const int q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
    const int q_rows = c.gated ? 2 * q_width : q_width;
    auto d_wq = Upload(RandomWeights(c.qk_type, q_rows, kCols, 61));
    auto d_wk = Upload(RandomWeights(c.qk_type, kv_width, kCols, 62));
    auto d_wv = Upload(RandomWeights(c.v_type, kv_width, kCols, 63));
    auto d_x = Upload(RandomActivations(c.n_tokens * kCols, 64));
    auto d_bq = Upload(RandomActivations(q_rows, 65));
    auto d_bk = Upload(RandomActivations(kv_width, 66));
    auto d_bv = Upload(RandomActivations(kv_width, 67));
    auto d_qw = Upload(RandomActivations(c.head_dim, 68));
    auto d_kw = Upload(RandomActivations(c.head_dim, 69));
    std::vector<int32_t> positions(c.n_tokens);
    for (int t = 0; t < c.n_tokens; ++t) positions[t] = kFirst + t;
    auto d_pos = Upload(positions);
    auto d_q = Output<float>(static_cast<size_t>(c.n_tokens) * q_width);
    auto d_qg = Output<float>(static_cast<size_t>(c.n_tokens) * q_rows);  // the gated query's group output
    auto d_gate = Output<float>(static_cast<size_t>(c.n_tokens) * q_width);
    auto d_k = Output<float>(static_cast<size_t>(c.n_tokens) * kv_width);
    auto d_v = Output<float>(static_cast<size_t>(c.n_tokens) * kv_width);
    const size_t k_bytes = RowBytes(c.types.k, kv_width) * (kFirst + c.n_tokens);
    const size_t v_bytes = RowBytes(c.types.v, kv_width) * (kFirst + c.n_tokens);
    auto keys = Upload(std::vector<uint8_t>(k_bytes, 0xAB));
    auto values = Upload(std::vector<uint8_t>(v_bytes, 0xCD));
    const RopeParams p{.n_heads = c.heads, .head_dim = c.head_dim, .rope_dim = c.rope_dim, .freq_base = 5e5f,
                       .neox = c.neox};
    const cuda::HeadNorms norms = c.norms ? cuda::HeadNorms{d_qw.get(), d_kw.get(), 1e-6f} : cuda::HeadNorms{};
    auto d_counters = Upload(std::vector<uint32_t>(cuda::QkvHeadCounters(p, c.kv_heads), 0));
    const WeightMatrix ws[] = {{c.qk_type, d_wq.get(), q_rows, kCols},
                               {c.qk_type, d_wk.get(), kv_width, kCols},
                               {c.v_type, d_wv.get(), kv_width, kCols}};
    float* const outs[] = {c.gated ? d_qg.get() : d_q.get(), d_k.get(), d_v.get()};
    const float* const with_biases[] = {d_bq.get(), d_bk.get(), d_bv.get()};
    const std::span<const float* const> biases =
        c.biases ? std::span<const float* const>(with_biases) : std::span<const float* const>();
    const cuda::Exec exec = Exec(cuda::MatMulGroupScratchBytes(ws, c.n_tokens));
    // The device's position: the first new row's index, read when it runs.
    auto d_first = Upload(std::vector<int32_t>{kFirst});
    const int32_t* first_pos_at = c.position_on_device ? d_first.get() : nullptr;
    const int first_pos = c.position_on_device ? 0 : kFirst;
    const cuda::ApiCounts before = cuda::CurrentApiCounts();
    for (int i = 0; i < launches; ++i) {
      if (fused) {
        const cuda::HeadsAfterQkv heads{.positions = d_pos.get(), .p = p, .k_heads = c.kv_heads, .norms = norms,
                                        .k_cache = keys.get(), .v_cache = values.get(), .first_pos = first_pos,
                                        .first_pos_at = first_pos_at, .types = c.types, .arrivals = d_counters.get(),
                                        .q_split = c.gated ? d_q.get() : nullptr,
                                        .gate = c.gated ? d_gate.get() : nullptr};
        const absl::Status s = cuda::MatMulGroupRopeAppend(ws, biases, d_x.get(), outs, c.n_tokens, exec, heads);
        EXPECT_TRUE(s.ok()) << s;
      } else {
        absl::Status s = cuda::MatMulGroupBias(ws, biases, d_x.get(), outs, c.n_tokens, exec);
        EXPECT_TRUE(s.ok()) << s;
        if (c.gated) {
          s = cuda::SplitGatedQuery(d_qg.get(), d_q.get(), d_gate.get(), c.n_tokens, c.heads, c.head_dim, stream());
          EXPECT_TRUE(s.ok()) << s;
        }
        s = cuda::RopeQKAppend(d_q.get(), d_k.get(), d_pos.get(), c.n_tokens, p, c.kv_heads, d_v.get(), keys.get(),
                               values.get(), first_pos, c.types, stream(), first_pos_at, norms);
        EXPECT_TRUE(s.ok()) << s;
      }
    }
    Result r;
    r.launches = (cuda::CurrentApiCounts() - before).launches;
    r.q = d_q.Download(stream());
    r.k = d_k.Download(stream());
    r.v = d_v.Download(stream());
    r.qg = d_qg.Download(stream());
    r.gate = d_gate.Download(stream());
    r.keys = keys.Download(stream());
    r.values = values.Download(stream());
    r.counters = d_counters.Download(stream());
    return r;
  }

  void ExpectSameBits(const Result& fused, const Result& apart) {
    ASSERT_EQ(fused.q.size(), apart.q.size());
    EXPECT_EQ(0, std::memcmp(fused.q.data(), apart.q.data(), fused.q.size() * 4)) << "q, turned";
    EXPECT_EQ(0, std::memcmp(fused.k.data(), apart.k.data(), fused.k.size() * 4)) << "k, turned";
    EXPECT_EQ(0, std::memcmp(fused.v.data(), apart.v.data(), fused.v.size() * 4)) << "v";
    EXPECT_EQ(0, std::memcmp(fused.qg.data(), apart.qg.data(), fused.qg.size() * 4)) << "a gated query's group output";
    EXPECT_EQ(0, std::memcmp(fused.gate.data(), apart.gate.data(), fused.gate.size() * 4)) << "its gate";
    EXPECT_EQ(fused.keys, apart.keys) << "the key cache";
    EXPECT_EQ(fused.values, apart.values) << "the value cache";
    EXPECT_EQ(fused.counters, std::vector<uint32_t>(fused.counters.size(), 0u)) << "the counters are left zero";
  }

  void Check(const Case& c) {
    SCOPED_TRACE(Name(c));
    const Result apart = Run(c, false);
    const Result fused = Run(c, true);
    EXPECT_EQ(fused.launches + (c.gated ? 2 : 1), apart.launches) << "RoPE's and the append's launch goes (and the split's)";
    ExpectSameBits(fused, apart);
  }
};

TEST_F(FusedQkvRopeCudaTest, HeadsTurnedAndAppendedInTheProjectionsLaunchGiveTheTwoOpsBits) {
  const KvCacheTypes f16{};
  const KvCacheTypes quantized{GgmlType::kQ8_0, GgmlType::kQ4_0};
  for (const GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kF16}) {
    for (const int n_tokens : {1, 3, kMaxDecodeTokens}) {
      for (const bool neox : {false, true}) {
        Check({type, type, 4, 2, 64, 64, neox, false, false, n_tokens, f16});
        Check({type, type, 4, 2, 64, 32, neox, true, true, n_tokens, quantized});
      }
    }
  }
  // Q4_K_M's layers with a Q6_K v: two launches, each with its heads' tails.
  Check({GgmlType::kQ4_K, GgmlType::kQ6_K, 8, 2, 128, 128, false, false, false, 1, f16});
  Check({GgmlType::kQ4_K, GgmlType::kQ6_K, 8, 2, 128, 128, true, true, true, 2, quantized});
  // Several heads a block (stories260K's head_dim of 8) and, with more
  // lanes a row, fewer rows a block than a head; an odd head_dim of part
  // warps with a partial rotation (qwen3's norms played at 96 threads).
  Check({GgmlType::kF32, GgmlType::kF32, 8, 4, 8, 8, false, false, false, 2, f16});
  Check({GgmlType::kQ8_0, GgmlType::kQ8_0, 8, 8, 8, 8, true, true, true, 1, f16});
  Check({GgmlType::kQ6_K, GgmlType::kQ6_K, 6, 2, 80, 64, true, true, true, 3, f16});
  Check({GgmlType::kQ4_K, GgmlType::kQ4_K, 2, 1, 256, 256, false, false, true, 1,
         KvCacheTypes{GgmlType::kQ4_1, GgmlType::kQ8_0}});
  // The position read on the device (a decode step replayed by a graph).
  Check({GgmlType::kQ4_K, GgmlType::kQ4_K, 4, 2, 64, 64, false, false, true, 1, quantized, true});
  // qwen3-next's gated query, split in the tails: a head of two blocks'
  // rows and of one (head_dim 8 of Q8_0: 16 rows a block), with its norms.
  for (const int n_tokens : {1, 3}) {
    Check({GgmlType::kQ4_K, GgmlType::kQ4_K, 4, 2, 64, 64, true, false, true, n_tokens, f16, true, true});
    Check({GgmlType::kQ8_0, GgmlType::kQ6_K, 8, 2, 8, 8, true, false, true, n_tokens, f16, false, true});
  }
}

TEST_F(FusedQkvRopeCudaTest, ASecondLaunchFindsTheCountersZeroAndGivesTheSameBits) {
  const Case c{GgmlType::kQ4_K, GgmlType::kQ6_K, 4, 2, 64, 64, true, true, true, 2, KvCacheTypes{}};
  const Result apart = Run(c, false);
  const Result fused = Run(c, true, /*launches=*/3);
  EXPECT_EQ(fused.launches, 3u * (apart.launches - 1));
  ExpectSameBits(fused, apart);
}

TEST_F(FusedQkvRopeCudaTest, RefusesWhatOneLaunchCannotDoAndLaunchesNothing) {
  constexpr int kHeads = 8, kKvHeads = 4, kHeadDim = 16, kTokens = 2;
  auto d_wq = Upload(RandomWeights(GgmlType::kQ8_0, kHeads * kHeadDim, kCols, 71));
  auto d_wkv = Upload(RandomWeights(GgmlType::kQ8_0, kKvHeads * kHeadDim, kCols, 72));
  auto d_x = Upload(RandomActivations(kTokens * kCols, 73));
  auto d_q = Output<float>(kTokens * kHeads * kHeadDim);
  auto d_k = Output<float>(kTokens * kKvHeads * kHeadDim);
  auto d_v = Output<float>(kTokens * kKvHeads * kHeadDim);
  auto d_pos = Upload(std::vector<int32_t>{0, 1});
  auto d_w = Upload(RandomActivations(kHeadDim, 74));
  auto keys = Output<uint8_t>(4096), values = Output<uint8_t>(4096);
  auto d_counters = Upload(std::vector<uint32_t>(kHeads + 2 * kKvHeads, 0));
  const WeightMatrix wq{GgmlType::kQ8_0, d_wq.get(), kHeads * kHeadDim, kCols};
  const WeightMatrix wkv{GgmlType::kQ8_0, d_wkv.get(), kKvHeads * kHeadDim, kCols};
  const cuda::Exec exec = Exec(1 << 16);
  const cuda::HeadsAfterQkv good{.positions = d_pos.get(),
                                 .p = RopeParams{.n_heads = kHeads, .head_dim = kHeadDim, .rope_dim = kHeadDim},
                                 .k_heads = kKvHeads,
                                 .norms = {},
                                 .k_cache = keys.get(),
                                 .v_cache = values.get(),
                                 .types = {},
                                 .arrivals = d_counters.get()};
  auto run = [&](std::vector<WeightMatrix> ws, std::vector<float*> outs, int n_tokens, const cuda::HeadsAfterQkv& h) {
    return cuda::MatMulGroupRopeAppend(ws, {}, d_x.get(), outs, n_tokens, exec, h);
  };
  const std::vector<WeightMatrix> qkv{wq, wkv, wkv};
  const std::vector<float*> outs{d_q.get(), d_k.get(), d_v.get()};
  const cuda::ApiCounts before = cuda::CurrentApiCounts();
  constexpr const char* kOp = "MatMulGroupRopeAppend";
  testing::ExpectInvalidArgument(run({wq, wkv}, {d_q.get(), d_k.get()}, kTokens, good), kOp, "q, k and v");
  testing::ExpectInvalidArgument(run(qkv, outs, kMaxDecodeTokens + 1, good), kOp, "one decode launch");
  testing::ExpectInvalidArgument(run({wq, wq, wkv}, outs, kTokens, good), kOp, "rows for q, k and v");
  testing::ExpectInvalidArgument(run(qkv, {d_q.get(), d_k.get(), d_k.get()}, kTokens, good), kOp, "overlap");
  cuda::HeadsAfterQkv quantized = good;
  quantized.types = KvCacheTypes{GgmlType::kQ8_0, GgmlType::kF16};
  testing::ExpectInvalidArgument(run(qkv, outs, kTokens, quantized), kOp, "not whole Q8_0 cache blocks");
  cuda::HeadsAfterQkv one_norm = good;
  one_norm.norms.q = d_w.get();
  testing::ExpectInvalidArgument(run(qkv, outs, kTokens, one_norm), kOp, "both weights");
  cuda::HeadsAfterQkv no_counters = good;
  no_counters.arrivals = nullptr;
  testing::ExpectInvalidArgument(run(qkv, outs, kTokens, no_counters), kOp, "arrivals is null");
  cuda::HeadsAfterQkv half_gated = good;
  half_gated.q_split = d_q.get();
  testing::ExpectInvalidArgument(run(qkv, outs, kTokens, half_gated), kOp, "both q_split and gate");
  cuda::HeadsAfterQkv no_positions = good;
  no_positions.positions = nullptr;
  testing::ExpectInvalidArgument(run(qkv, outs, kTokens, no_positions), kOp, "null");
  EXPECT_EQ((cuda::CurrentApiCounts() - before).launches, 0u) << "nothing launched";
}

}  // namespace
}  // namespace octo
