// kernels/cuda/fused.h: a producer (RmsNorm, AddRmsNorm, SiluMul) that also
// rounds its output for the decode MatMul reading it writes what the two ops
// apart write -- its float output, the 8-bit activations MatMulGroup's own
// quantize launch would, and so the MatMul's bits -- in one launch fewer;
// both rules (per 32 for Q8_0, per 256 for Q4_K), a token and a few. And
// the launches that do two ops' work otherwise: RoPE with the KV append (and
// qwen3's head norms), a group's biases in its decode launch.
#include <cstdint>
#include <cstring>
#include <functional>
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

using testing::DeviceVector;
using testing::RandomActivations;
using testing::RandomWeights;

constexpr int64_t kCols = 512;
constexpr int64_t kRows = 48;
// A row too wide for a norm block to hold in registers (rmsnorm.cu: 1024
// threads, 8 elements each): the norm reads it from memory at each step.
constexpr int64_t kWideCols = 9216;

// Fills out (n_tokens, cols) from residual (the same shape; AddRmsNorm adds
// to it), also rounding out into q8 when it is non-null.
using Producer = std::function<absl::Status(int n_tokens, float* residual, float* out, const cuda::ActQ8Out* q8)>;

class FusedCudaTest : public testing::CudaOpTest {
 protected:
  // What one run of a producer and the MatMul after it leaves behind.
  struct Result {
    std::vector<float> produced, residual, matmul;
    std::vector<uint8_t> act;  // the 8-bit activations, as laid out in the scratch
    uint64_t launches = 0;
  };

  // Runs `produce` (filling `out` from the inputs, and rounding into q8 when
  // it is non-null), then the MatMul of w over out: fused, the producer
  // rounds and MatMulGroup takes its activations; apart, MatMulGroup rounds
  // out itself.
  Result Run(GgmlType type, int n_tokens, bool fused, const Producer& produce, int64_t cols) {
    const std::vector<uint8_t> w_bytes = RandomWeights(type, kRows, cols, 7);
    auto d_w = Upload(w_bytes);
    auto d_residual = Upload(RandomActivations(n_tokens * cols, 11));
    auto d_out = Output<float>(static_cast<size_t>(n_tokens * cols));
    auto d_matmul = Output<float>(static_cast<size_t>(n_tokens * kRows));
    const WeightMatrix w{type, d_w.get(), kRows, cols};
    float* const outs[] = {d_matmul.get()};
    const size_t scratch_bytes = cuda::MatMulGroupScratchBytes({&w, 1}, n_tokens);
    const cuda::Exec exec = Exec(scratch_bytes);
    const cuda::ActQ8Out q8 = cuda::ActQ8At(exec.scratch, cuda::ActQ8RuleFor(type), n_tokens, cols);
    const cuda::ApiCounts before = cuda::CurrentApiCounts();
    absl::Status s = produce(n_tokens, d_residual.get(), d_out.get(), fused ? &q8 : nullptr);
    EXPECT_TRUE(s.ok()) << s;
    s = fused ? cuda::MatMulGroup({&w, 1}, d_out.get(), outs, n_tokens, exec, q8)
              : cuda::MatMulGroup({&w, 1}, d_out.get(), outs, n_tokens, exec);
    EXPECT_TRUE(s.ok()) << s;
    Result r;
    r.launches = (cuda::CurrentApiCounts() - before).launches;
    r.produced = d_out.Download(stream());
    r.residual = d_residual.Download(stream());
    r.matmul = d_matmul.Download(stream());
    r.act.resize(cuda::ActQ8Bytes(n_tokens, cols));
    EXPECT_EQ(cudaMemcpy(r.act.data(), exec.scratch, r.act.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    return r;
  }

  void ExpectFusedIsApart(const std::string& op, const Producer& produce, int64_t cols = kCols) {
    for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K}) {
      for (int n_tokens : {1, 3}) {
        SCOPED_TRACE(absl::StrFormat("%s %s tokens %d cols %d", op, GgmlTypeName(type), n_tokens, cols));
        const Result apart = Run(type, n_tokens, false, produce, cols),
                     fused = Run(type, n_tokens, true, produce, cols);
        EXPECT_EQ(fused.launches + 1, apart.launches) << "the quantize launch goes";
        EXPECT_EQ(0, std::memcmp(fused.produced.data(), apart.produced.data(), fused.produced.size() * 4));
        EXPECT_EQ(0, std::memcmp(fused.residual.data(), apart.residual.data(), fused.residual.size() * 4));
        EXPECT_EQ(fused.act, apart.act) << "the producer's rounding is the quantize launch's";
        EXPECT_EQ(0, std::memcmp(fused.matmul.data(), apart.matmul.data(), fused.matmul.size() * 4));
      }
    }
  }
};

TEST_F(FusedCudaTest, ANormRoundingItsOutputGivesTheTwoLaunchesBits) {
  // A row the norm holds in registers, and one it reads from memory.
  for (const int64_t cols : {kCols, kWideCols}) {
    auto d_weight = Upload(RandomActivations(cols, 3));
    ExpectFusedIsApart("RmsNorm", [&](int n, float* residual, float* out, const cuda::ActQ8Out* q8) {
      return q8 == nullptr ? cuda::RmsNorm(residual, d_weight.get(), out, n, cols, 1e-5f, stream())
                           : cuda::RmsNorm(residual, d_weight.get(), out, n, cols, 1e-5f, stream(), *q8);
    }, cols);
    auto d_delta = Upload(RandomActivations(3 * cols, 5));
    ExpectFusedIsApart("AddRmsNorm", [&](int n, float* residual, float* out, const cuda::ActQ8Out* q8) {
      // The forward pass's form: out is the delta it adds.
      EXPECT_EQ(cudaMemcpy(out, d_delta.get(), n * cols * 4, cudaMemcpyDeviceToDevice), cudaSuccess);
      return q8 == nullptr ? cuda::AddRmsNorm(residual, out, d_weight.get(), out, n, cols, 1e-5f, stream())
                           : cuda::AddRmsNorm(residual, out, d_weight.get(), out, n, cols, 1e-5f, stream(), *q8);
    }, cols);
  }
}

TEST_F(FusedCudaTest, ASiluProductRoundingItsOutputGivesTheTwoLaunchesBits) {
  auto d_up = Upload(RandomActivations(3 * kCols, 9));
  ExpectFusedIsApart("SiluMul", [&](int n, float* residual, float* out, const cuda::ActQ8Out* q8) {
    return q8 == nullptr ? cuda::SiluMul(residual, d_up.get(), out, n * kCols, stream())
                         : cuda::SiluMul(residual, d_up.get(), out, n * kCols, stream(), *q8);
  });
}

// RoPE on q and k then the append of k and v: one launch, the values and
// cache bytes of the two, for each cache type, both rotation styles, a
// partial rotation and a token or three.
TEST_F(FusedCudaTest, RopeAndTheKvAppendInOneLaunchGiveTheTwoLaunchesBytes) {
  constexpr int kHeads = 4, kKvHeads = 2, kHeadDim = 64, kKvDim = kKvHeads * kHeadDim, kFirst = 5;
  const std::vector<float> q = RandomActivations(3 * kHeads * kHeadDim, 21), k = RandomActivations(3 * kKvDim, 22),
                           v = RandomActivations(3 * kKvDim, 23);
  auto d_pos = Upload(std::vector<int32_t>{5, 6, 7});
  for (const KvCacheTypes types : {KvCacheTypes{}, KvCacheTypes{GgmlType::kQ8_0, GgmlType::kQ4_0},
                                   KvCacheTypes{GgmlType::kQ4_1, GgmlType::kF16}}) {
    for (const bool neox : {false, true}) {
      for (const int rope_dim : {kHeadDim, 32}) {
        for (const int n : {1, 3}) {
          SCOPED_TRACE(absl::StrFormat("%s/%s neox %d rope_dim %d tokens %d", GgmlTypeName(types.k),
                                       GgmlTypeName(types.v), neox, rope_dim, n));
          const RopeParams p{.n_heads = kHeads, .head_dim = kHeadDim, .rope_dim = rope_dim, .freq_base = 5e5f,
                             .neox = neox};
          const size_t k_bytes = RowBytes(types.k, kKvDim) * (kFirst + n), v_bytes = RowBytes(types.v, kKvDim) * (kFirst + n);
          struct Out {
            std::vector<float> q, k;
            std::vector<uint8_t> keys, values;
            uint64_t launches;
          };
          auto run = [&](bool fused) {
            auto d_q = Upload(q), d_k = Upload(k), d_v = Upload(v);
            auto keys = Upload(std::vector<uint8_t>(k_bytes, 0xAB)), values = Upload(std::vector<uint8_t>(v_bytes, 0xCD));
            const cuda::ApiCounts before = cuda::CurrentApiCounts();
            if (fused) {
              EXPECT_TRUE(cuda::RopeQKAppend(d_q.get(), d_k.get(), d_pos.get(), n, p, kKvHeads, d_v.get(), keys.get(),
                                             values.get(), kFirst, types, stream())
                              .ok());
            } else {
              EXPECT_TRUE(cuda::RopeQK(d_q.get(), d_k.get(), d_pos.get(), n, p, kKvHeads, stream()).ok());
              EXPECT_TRUE(cuda::KvAppend(d_k.get(), d_v.get(), n, kKvDim, keys.get(), values.get(), kFirst, types,
                                         stream())
                              .ok());
            }
            const uint64_t launches = (cuda::CurrentApiCounts() - before).launches;
            return Out{d_q.Download(stream()), d_k.Download(stream()), keys.Download(stream()),
                       values.Download(stream()), launches};
          };
          const Out apart = run(false), fused = run(true);
          EXPECT_EQ(fused.launches, 1u);
          EXPECT_EQ(apart.launches, 2u);
          EXPECT_EQ(0, std::memcmp(fused.q.data(), apart.q.data(), q.size() * 4));
          EXPECT_EQ(0, std::memcmp(fused.k.data(), apart.k.data(), k.size() * 4));
          EXPECT_EQ(fused.keys, apart.keys);
          EXPECT_EQ(fused.values, apart.values);
        }
      }
    }
  }
}

// qwen3's per-head q and k norms folded in too: one launch for the four.
TEST_F(FusedCudaTest, HeadNormsRopeAndTheKvAppendInOneLaunchGiveTheFourLaunchesBytes) {
  // qwen3's shape, and more kv heads than a block loads at once (8) with a
  // head_dim of part warps and a partial rotation.
  struct Shape {
    int heads, kv_heads, head_dim, rope_dim;
  };
  for (const Shape& shape : {Shape{4, 2, 128, 128}, Shape{20, 10, 80, 64}}) {
    const int heads = shape.heads, kv_heads = shape.kv_heads, head_dim = shape.head_dim, kv_dim = kv_heads * head_dim;
    constexpr int kFirst = 3;
    const std::vector<float> q = RandomActivations(2 * heads * head_dim, 41), k = RandomActivations(2 * kv_dim, 42),
                             v = RandomActivations(2 * kv_dim, 43);
    auto d_qw = Upload(RandomActivations(head_dim, 44)), d_kw = Upload(RandomActivations(head_dim, 45));
    auto d_pos = Upload(std::vector<int32_t>{3, 4});
    const KvCacheTypes types{GgmlType::kQ8_0, GgmlType::kF16};
    for (const bool neox : {false, true}) {
      for (const int n : {1, 2}) {
        SCOPED_TRACE(absl::StrFormat("heads %d/%d head_dim %d neox %d tokens %d", heads, kv_heads, head_dim, neox, n));
        const RopeParams p{
            .n_heads = heads, .head_dim = head_dim, .rope_dim = shape.rope_dim, .freq_base = 1e6f, .neox = neox};
        const size_t k_bytes = RowBytes(types.k, kv_dim) * (kFirst + n),
                     v_bytes = RowBytes(types.v, kv_dim) * (kFirst + n);
        auto run = [&](bool fused, uint64_t* launches) {
          auto d_q = Upload(q), d_k = Upload(k), d_v = Upload(v);
          auto keys = Upload(std::vector<uint8_t>(k_bytes, 0)), values = Upload(std::vector<uint8_t>(v_bytes, 0));
          const cuda::ApiCounts before = cuda::CurrentApiCounts();
          if (fused) {
            EXPECT_TRUE(cuda::RopeQKAppend(d_q.get(), d_k.get(), d_pos.get(), n, p, kv_heads, d_v.get(), keys.get(),
                                           values.get(), kFirst, types, stream(), nullptr,
                                           cuda::HeadNorms{d_qw.get(), d_kw.get(), 1e-6f})
                            .ok());
          } else {
            EXPECT_TRUE(cuda::RmsNorm(d_q.get(), d_qw.get(), d_q.get(), n * heads, head_dim, 1e-6f, stream()).ok());
            EXPECT_TRUE(cuda::RmsNorm(d_k.get(), d_kw.get(), d_k.get(), n * kv_heads, head_dim, 1e-6f, stream()).ok());
            EXPECT_TRUE(cuda::RopeQK(d_q.get(), d_k.get(), d_pos.get(), n, p, kv_heads, stream()).ok());
            EXPECT_TRUE(
                cuda::KvAppend(d_k.get(), d_v.get(), n, kv_dim, keys.get(), values.get(), kFirst, types, stream()).ok());
          }
          *launches = (cuda::CurrentApiCounts() - before).launches;
          std::vector<uint8_t> all = keys.Download(stream());
          const std::vector<uint8_t> vals = values.Download(stream());
          all.insert(all.end(), vals.begin(), vals.end());
          const std::vector<float> got_q = d_q.Download(stream());
          all.insert(all.end(), reinterpret_cast<const uint8_t*>(got_q.data()),
                     reinterpret_cast<const uint8_t*>(got_q.data() + got_q.size()));
          return all;
        };
        uint64_t apart_launches = 0, fused_launches = 0;
        const std::vector<uint8_t> apart = run(false, &apart_launches), fused = run(true, &fused_launches);
        EXPECT_EQ(apart_launches, 4u);
        EXPECT_EQ(fused_launches, 1u);
        EXPECT_EQ(fused, apart) << "caches and rotated q";
      }
    }
  }
}

// qwen2's q, k and v biases in the decode launch: AddBias's bits, two
// launches fewer for two biases; the cuBLAS path (more tokens) adds them
// after, the same bits too.
TEST_F(FusedCudaTest, BiasesInTheDecodeLaunchGiveTheAddBiasBits) {
  constexpr int64_t kKvRows = 16;
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kF16}) {
    for (int n_tokens : {1, 3, 20, kMaxDecodePathTokens + 6}) {
      SCOPED_TRACE(absl::StrFormat("%s tokens %d", GgmlTypeName(type), n_tokens));
      auto d_wq = Upload(RandomWeights(type, kRows, kCols, 61)), d_wk = Upload(RandomWeights(type, kKvRows, kCols, 62));
      auto d_bq = Upload(RandomActivations(kRows, 63)), d_bv = Upload(RandomActivations(kKvRows, 64));
      auto d_x = Upload(RandomActivations(n_tokens * kCols, 65));
      const WeightMatrix ws[] = {{type, d_wq.get(), kRows, kCols}, {type, d_wk.get(), kKvRows, kCols},
                                 {type, d_wk.get(), kKvRows, kCols}};
      const float* const biases[] = {d_bq.get(), nullptr, d_bv.get()};
      const cuda::Exec exec = Exec(cuda::MatMulGroupScratchBytes(ws, n_tokens));
      auto run = [&](bool fused, uint64_t* launches) {
        auto q = Output<float>(n_tokens * kRows), k = Output<float>(n_tokens * kKvRows), v = Output<float>(n_tokens * kKvRows);
        float* const outs[] = {q.get(), k.get(), v.get()};
        const cuda::ApiCounts before = cuda::CurrentApiCounts();
        if (fused) {
          EXPECT_TRUE(cuda::MatMulGroupBias(ws, biases, d_x.get(), outs, n_tokens, exec).ok());
        } else {
          EXPECT_TRUE(cuda::MatMulGroup(ws, d_x.get(), outs, n_tokens, exec).ok());
          EXPECT_TRUE(cuda::AddBias(q.get(), d_bq.get(), n_tokens, kRows, stream()).ok());
          EXPECT_TRUE(cuda::AddBias(v.get(), d_bv.get(), n_tokens, kKvRows, stream()).ok());
        }
        *launches = (cuda::CurrentApiCounts() - before).launches;
        std::vector<float> all = q.Download(stream());
        for (const auto* o : {&k, &v}) {
          const std::vector<float> part = o->Download(stream());
          all.insert(all.end(), part.begin(), part.end());
        }
        return all;
      };
      uint64_t apart_launches = 0, fused_launches = 0;
      const std::vector<float> apart = run(false, &apart_launches), fused = run(true, &fused_launches);
      ASSERT_EQ(fused.size(), apart.size());
      EXPECT_EQ(0, std::memcmp(fused.data(), apart.data(), fused.size() * 4));
      if (n_tokens <= kMaxDecodePathTokens) {
        EXPECT_EQ(fused_launches + 2, apart_launches);
      }
    }
  }
  // One bias per matrix, or none.
  const WeightMatrix w{GgmlType::kQ8_0, nullptr, kRows, kCols};
  const float* const one[] = {nullptr, nullptr};
  float* const outs[] = {nullptr};
  testing::ExpectInvalidArgument(cuda::MatMulGroupBias({&w, 1}, one, nullptr, outs, 1, Exec(0)), "MatMulGroup",
                                 "2 biases for 1 matrices");
}

TEST_F(FusedCudaTest, RefusesWhatTheRoundingCannotHold) {
  auto d_x = Upload(RandomActivations(kCols, 1));
  auto d_out = Output<float>(kCols);
  const cuda::Exec exec = Exec(cuda::ActQ8Bytes(kMaxDecodeTokens + 1, kCols));
  const cuda::ActQ8Out per256 = cuda::ActQ8At(exec.scratch, cuda::ActQ8Rule::kPer256, 1, kCols);
  // 384 = one and a half 256-element chunks.
  testing::ExpectInvalidArgument(cuda::RmsNorm(d_x.get(), d_x.get(), d_out.get(), 1, 384, 1e-5f, stream(), per256),
                                 "RmsNorm", "rounding chunks");
  testing::ExpectInvalidArgument(cuda::SiluMul(d_x.get(), d_x.get(), d_out.get(), 384, stream(), per256), "SiluMul",
                                 "rounding chunks");
  testing::ExpectInvalidArgument(
      cuda::RmsNorm(d_x.get(), d_x.get(), d_out.get(), 1, kCols, 1e-5f, stream(), cuda::ActQ8Out{}), "RmsNorm",
      "q8 is null");
  // The MatMul's weights round by the other rule, or too many tokens.
  auto d_w = Upload(RandomWeights(GgmlType::kQ8_0, kRows, kCols, 2));
  const WeightMatrix w{GgmlType::kQ8_0, d_w.get(), kRows, kCols};
  auto d_mm = Output<float>(kRows * (kMaxDecodeTokens + 1));
  float* const outs[] = {d_mm.get()};
  testing::ExpectInvalidArgument(cuda::MatMulGroup({&w, 1}, d_x.get(), outs, 1, exec, per256), "MatMulGroup",
                                 "another rule");
  testing::ExpectInvalidArgument(cuda::MatMulGroup({&w, 1}, d_x.get(), outs, kMaxDecodeTokens + 1, exec, per256),
                                 "MatMulGroup", "one decode launch");
  EXPECT_EQ(cuda::SharedRounding({&w, 1}, 1), cuda::ActQ8Rule::kPer32);
  EXPECT_EQ(cuda::SharedRounding({&w, 1}, kMaxDecodeTokens + 1), std::nullopt);
  const WeightMatrix mixed[] = {w, WeightMatrix{GgmlType::kQ4_K, d_w.get(), kRows, kCols}};
  EXPECT_EQ(cuda::SharedRounding(mixed, 1), std::nullopt) << "two rules";
  const WeightMatrix with_float[] = {w, WeightMatrix{GgmlType::kF16, d_w.get(), kRows, kCols}};
  EXPECT_EQ(cuda::SharedRounding(with_float, 1), std::nullopt) << "a float matrix";
}

}  // namespace
}  // namespace octo
