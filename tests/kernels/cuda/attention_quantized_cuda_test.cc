// cuda::Attention over a quantized KV cache against cpu::Attention (portable
// path) on the same encoded rows, for every pair of cache types: causal
// prefill and decode across several splits, and tree queries.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/ops.h"
#include "tests/kernels/attention_test_util.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/quantized_kv_test_util.h"

namespace octo {
namespace {

using Shape = testing::AttentionShape;
using testing::Describe;
using testing::QuantizedInputs;

// Per query seeing n positions in S splits, with V the largest |decoded
// value| and u = 2^-24: attention_cuda_test.cc derives |cuda - cpu| <= V
// (2^-11 + n 2^-25 + (n + 286 + 2 S + 4 ln n) u) plus its square, where the
// first two terms are the CPU's rounding of the weights to fp16. Over a
// quantized V neither side rounds the weights (ops.h), so those two terms
// drop out: the float sums alone remain.
double Tolerance(int n, double v_max, bool fp16_weights) {
  const double u = 0x1p-24;
  const double splits = (n + kAttentionSplit - 1) / kAttentionSplit;
  const double rounding = fp16_weights ? 0x1p-11 + n * 0x1p-25 : 0.0;
  const double tol1 = v_max * (rounding + (n + 286 + 2 * splits + 4 * std::log(n)) * u);
  return tol1 + tol1 * tol1;
}

class AttentionQuantizedCudaTest : public testing::CudaOpTest {
 protected:
  // cuda::Attention on the device copies of `in`, with p's shape and types
  // (tree_mask, when set, a device pointer).
  std::vector<float> RunCuda(const QuantizedInputs& in, const AttentionParams& p) {
    auto q = Upload(in.q);
    auto k = Upload(in.k);
    auto v = Upload(in.v);
    auto out = Output<float>(in.q.size());
    const absl::Status status = cuda::Attention(q.get(), k.get(), v.get(), out.get(), p,
                                                Exec(cuda::AttentionScratchBytes(p)));
    EXPECT_TRUE(status.ok()) << status;
    return out.Download(stream());
  }

  // The worst |cuda - cpu| / Tolerance over the elements, n_of(token) the
  // positions that token's queries see.
  template <typename NOf>
  double Compare(const QuantizedInputs& in, const Shape& s, const std::vector<float>& got,
                 const std::vector<float>& want, NOf n_of, const std::string& what) {
    double v_max = 0;
    for (float x : in.v_decoded) v_max = std::max(v_max, static_cast<double>(std::fabs(x)));
    const size_t token = static_cast<size_t>(s.n_heads) * s.head_dim;
    double worst = 0;
    size_t misses = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double tol = Tolerance(n_of(static_cast<int>(i / token)), v_max, in.types.v == GgmlType::kF16);
      const double diff = std::fabs(got[i] - want[i]);
      if (!(diff <= tol) && misses++ == 0) {
        ADD_FAILURE() << what << ": element " << i << ": cuda " << got[i] << ", cpu " << want[i] << ", tolerance "
                      << tol;
      }
      worst = std::max(worst, diff / tol);
    }
    EXPECT_EQ(misses, 0u) << what;
    return worst;
  }
};

std::vector<float> RunCpu(const QuantizedInputs& in, const AttentionParams& p) {
  std::vector<float> out(in.q.size());
  const absl::Status status = cpu::Attention(in.q.data(), in.k.data(), in.v.data(), out.data(), p, {});
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// head_dim 8 (a block across four heads), 48 (blocks across two), 64, 128;
// contexts under one split, across split edges in a batch, and a 1000-row
// decode. Rows after the last query's hold NaN scales: reading one shows.
constexpr Shape kShapes[] = {{5, 3, 8, 4, 8}, {9, 250, 4, 2, 64}, {3, 20, 4, 2, 48}, {1, 1000, 8, 2, 128}};

TEST_F(AttentionQuantizedCudaTest, MatchesCpu) {
  uint32_t seed = 1;
  for (const KvCacheTypes& types : testing::QuantizedTypePairs()) {
    double worst = 0;
    for (const Shape& s : kShapes) {
      const QuantizedInputs in = testing::RandomQuantizedInputs(s, types, seed++, /*extra_rows=*/3);
      const AttentionParams p = testing::QuantizedParamsFor(s, types);
      worst = std::max(worst, Compare(in, s, RunCuda(in, p), RunCpu(in, p),
                                      [&](int t) { return s.first_pos + t + 1; }, Describe(types) + " " + Describe(s)));
    }
    std::printf("%s: worst |cuda - cpu| %.2f of its tolerance\n", Describe(types).c_str(), worst);
  }
}

// Over every pair of cache types, a prefill across a split edge gives the
// same bits with one head a block as with 2, 3 or 4 of a kv head's 6 sharing
// each decoded key and value.
TEST_F(AttentionQuantizedCudaTest, HeadsPerBlockDoNotChangeTheBits) {
  uint32_t seed = 500;
  const Shape s = {12, 250, 12, 2, 64};
  for (const KvCacheTypes& types : testing::QuantizedTypePairs()) {
    const QuantizedInputs in = testing::RandomQuantizedInputs(s, types, seed++, /*extra_rows=*/2);
    const AttentionParams p = testing::QuantizedParamsFor(s, types);
    std::vector<float> one_head;
    {
      testing::ScopedAttentionHeads heads(1);
      one_head = RunCuda(in, p);
    }
    for (const int heads : {2, 3, 4}) {
      testing::ScopedAttentionHeads scoped(heads);
      const std::vector<float> got = RunCuda(in, p);
      EXPECT_EQ(std::memcmp(got.data(), one_head.data(), got.size() * sizeof(float)), 0)
          << Describe(types) << " " << Describe(s) << ": " << heads << " heads a block";
    }
  }
}

TEST_F(AttentionQuantizedCudaTest, TreeQueriesMatchCpu) {
  uint32_t seed = 300;
  for (const KvCacheTypes& types : {KvCacheTypes{GgmlType::kQ8_0, GgmlType::kQ8_0},
                                    KvCacheTypes{GgmlType::kQ4_0, GgmlType::kQ4_0},
                                    KvCacheTypes{GgmlType::kQ4_1, GgmlType::kF16}}) {
    for (const Shape& s : {Shape{24, 0, 8, 2, 64}, Shape{31, 270, 8, 4, 8}}) {
      const testing::DraftTree tree = testing::RandomDraftTree(s.n_tokens, 10, 0.5, seed);
      const QuantizedInputs in = testing::RandomQuantizedInputs(s, types, seed++, /*extra_rows=*/2);
      const auto mask = Upload(tree.mask);
      AttentionParams p = testing::QuantizedParamsFor(s, types);
      p.tree_base = s.first_pos;
      p.tree_mask = mask.get();
      const std::vector<float> got = RunCuda(in, p);
      p.tree_mask = tree.mask.data();
      Compare(in, s, got, RunCpu(in, p), [&](int t) { return s.first_pos + std::popcount(tree.mask[t]); },
              Describe(types) + " tree " + Describe(s));
    }
  }
}

}  // namespace
}  // namespace octo
