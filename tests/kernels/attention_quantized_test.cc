// cpu::Attention over a quantized KV cache (Q8_0, Q4_0, Q4_1 keys and/or
// values): the kernel against a double reference over the decoded cache,
// the result against exact attention over the values before they were
// encoded within a bound derived from the cache's own decode error, and the
// tree contract (a tree query is the causal op on its compacted cache, bit
// for bit) on encoded rows.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/attention_kernels.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/ops.h"
#include "tests/kernels/attention_test_util.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/quantized_kv_test_util.h"

namespace octo {
namespace {

using Shape = testing::AttentionShape;
using testing::Describe;
using testing::QuantizedInputs;

// Rows of n_kv_heads * head_dim values, a multiple of 32: head_dim 8 (a
// block spans four heads, as in stories260K), 16, 48 (blocks across
// heads at odd offsets), 64, 80, 128; GQA 1 to 4; prefill and long decode.
constexpr Shape kShapes[] = {{5, 3, 8, 4, 8},    {40, 0, 2, 2, 16},  {1, 0, 4, 4, 64},  {3, 5, 8, 4, 128},
                             {7, 0, 8, 1, 64},   {4, 2, 4, 2, 48},   {17, 0, 4, 2, 80}, {1, 2000, 8, 2, 128}};

// Against the reference over the decoded cache: the same float steps as
// over an fp16 cache (attention_test.cc derives 1e-5 for them), with the
// decoded values in place of the fp16 ones; over an fp16 V, plus what a
// weight at an fp16 rounding midpoint may move (AttentionReference's flip).
constexpr double kRefTol = 1e-5;

std::vector<cpu::Simd> SimdModes() {
  std::vector<cpu::Simd> modes = {cpu::Simd::kPortable};
  if (cpu::DetectSimd() == cpu::Simd::kAvx2) modes.push_back(cpu::Simd::kAvx2);
  return modes;
}

std::vector<float> RunCpu(const QuantizedInputs& in, const AttentionParams& p, const cpu::Exec& exec) {
  std::vector<float> out(in.q.size(), -7.0f);
  const absl::Status status = cpu::Attention(in.q.data(), in.k.data(), in.v.data(), out.data(), p, exec);
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
  return worst;
}

TEST(AttentionQuantizedCpuTest, MatchesDoubleReferenceOverTheDecodedCache) {
  cpu::ThreadPool pool(2);
  uint32_t seed = 1;
  for (const KvCacheTypes& types : testing::QuantizedTypePairs()) {
    for (const Shape& s : kShapes) {
      const QuantizedInputs in = testing::RandomQuantizedInputs(s, types, seed++, /*extra_rows=*/2);
      std::vector<double> flip;
      const std::vector<double> want = testing::DecodedReference(in, s, &flip);
      for (cpu::Simd simd : SimdModes()) {
        const std::vector<float> got = RunCpu(in, testing::QuantizedParamsFor(s, types), {&pool, simd});
        size_t misses = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          if (!(std::fabs(got[i] - want[i]) <= kRefTol + flip[i]) && misses++ == 0) {
            ADD_FAILURE() << Describe(types) << " " << Describe(s) << " simd=" << cpu::SimdName(simd) << ": element "
                          << i << ": got " << got[i] << ", want " << want[i];
          }
        }
        EXPECT_EQ(misses, 0u) << Describe(types) << " " << Describe(s);
      }
    }
  }
}

// Against exact attention over the values before encoding (q and weights
// not rounded), per query (token, head), with dk and dv the largest decode
// error of any key and value in the cache and K, V the largest |key| and
// |value|:
//  - each score moves by at most eps = scale * sum_d |q_d| (dk + 2^-11 (K +
//    dk)): the keys' error, and q's rounding to fp16 (2^-11 relative) times
//    the decoded key;
//  - so each softmax weight moves by a factor within [e^-2eps, e^2eps], and
//    sum_i |w'_i - w_i| <= e^2eps - 1; times the largest decoded value V + dv;
//  - the values' own error adds at most dv (the weights sum to 1), and over
//    an fp16 V the weights' rounding 2^-11 (V + dv);
//  - float arithmetic, kRefTol.
// A wrong scale, a misread block or a row from the wrong head breaks it.
// Prints, per pair of types, the worst error and its share of the bound:
// Q8_0 errs far less than Q4_0 and Q4_1, which the last check holds too.
TEST(AttentionQuantizedCpuTest, StaysWithinTheBoundDerivedFromTheDecodeError) {
  cpu::ThreadPool pool(2);
  uint32_t seed = 100;
  double worst_q8 = 0, worst_q4 = 0;
  for (const KvCacheTypes& types : testing::QuantizedTypePairs()) {
    double worst_err = 0, worst_share = 0;
    for (const Shape& s : kShapes) {
      const QuantizedInputs in = testing::RandomQuantizedInputs(s, types, seed++);
      const std::vector<double> exact =
          testing::AttentionReference(in.q, in.k_values, in.v_values, s, /*round_q=*/false, /*round_weights=*/false);
      const std::vector<float> got = RunCpu(in, testing::QuantizedParamsFor(s, types), {&pool, cpu::DetectSimd()});
      const double dk = MaxAbsDiff(in.k_decoded, in.k_values), dv = MaxAbsDiff(in.v_decoded, in.v_values);
      double k_max = 0, v_max = 0;
      for (float x : in.k_values) k_max = std::max(k_max, static_cast<double>(std::fabs(x)));
      for (float x : in.v_values) v_max = std::max(v_max, static_cast<double>(std::fabs(x)));
      const double scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
      for (int t = 0; t < s.n_tokens; ++t) {
        for (int h = 0; h < s.n_heads; ++h) {
          const size_t at = (static_cast<size_t>(t) * s.n_heads + h) * s.head_dim;
          double q_l1 = 0;
          for (int d = 0; d < s.head_dim; ++d) q_l1 += std::fabs(in.q[at + d]);
          const double eps = scale * q_l1 * (dk + 0x1p-11 * (k_max + dk));
          const double bound = std::expm1(2 * eps) * (v_max + dv) + dv +
                               (types.v == GgmlType::kF16 ? 0x1p-11 * (v_max + dv) : 0) + kRefTol;
          for (int d = 0; d < s.head_dim; ++d) {
            const double err = std::fabs(got[at + d] - exact[at + d]);
            EXPECT_LE(err, bound) << Describe(types) << " " << Describe(s) << " token " << t << " head " << h;
            worst_err = std::max(worst_err, err);
            worst_share = std::max(worst_share, err / bound);
          }
        }
      }
    }
    std::printf("%s: worst |attention - exact| %.3g, %.2f of its bound\n", Describe(types).c_str(), worst_err,
                worst_share);
    if (types.k == types.v && types.k == GgmlType::kQ8_0) worst_q8 = worst_err;
    if (types.k == types.v && types.k == GgmlType::kQ4_0) worst_q4 = worst_err;
  }
  EXPECT_LT(worst_q8 * 4, worst_q4) << "Q8_0 should err several times less than Q4_0";
}

// Tree queries read encoded rows where their masks put them: each one's
// output is, bit for bit, the causal op's for the same query on a cache
// holding those rows contiguously (the rows KvCache::KeepRows moves as
// bytes).
TEST(AttentionQuantizedCpuTest, TreeQueriesMatchTheCausalOpOnTheCompactedCacheBitForBit) {
  cpu::ThreadPool pool(3);
  uint32_t seed = 700;
  for (const KvCacheTypes& types : {KvCacheTypes{GgmlType::kQ8_0, GgmlType::kQ8_0},
                                    KvCacheTypes{GgmlType::kQ4_0, GgmlType::kF16},
                                    KvCacheTypes{GgmlType::kF16, GgmlType::kQ4_1}}) {
    for (const Shape& s : {Shape{20, 0, 8, 2, 64}, Shape{31, 5, 8, 4, 8}, Shape{40, 70, 4, 1, 96}}) {
      const testing::DraftTree tree = testing::RandomDraftTree(s.n_tokens, 12, 0.5, seed);
      const QuantizedInputs in = testing::RandomQuantizedInputs(s, types, seed++, /*extra_rows=*/3);
      for (cpu::Simd simd : SimdModes()) {
        const cpu::Exec exec = {&pool, simd};
        AttentionParams p = testing::QuantizedParamsFor(s, types);
        p.tree_mask = tree.mask.data();
        p.tree_base = s.first_pos;
        const std::vector<float> got = RunCpu(in, p, exec);
        const size_t token = static_cast<size_t>(s.n_heads) * s.head_dim;
        for (int t = 0; t < s.n_tokens; ++t) {
          const Shape compact = testing::CompactedShape(s, s.first_pos, tree.mask[t]);
          const QuantizedInputs one = testing::CompactQuantizedTreeQuery(in, s, s.first_pos, tree.mask[t], t);
          const std::vector<float> want = RunCpu(one, testing::QuantizedParamsFor(compact, types), exec);
          EXPECT_EQ(std::memcmp(want.data(), got.data() + t * token, token * sizeof(float)), 0)
              << Describe(types) << " " << Describe(s) << " simd=" << cpu::SimdName(simd) << ": query " << t;
        }
      }
    }
  }
}

// A token decoded alone (n_tokens 1 after the earlier rows) gets its row of
// the prefill bit for bit, over a quantized cache too.
TEST(AttentionQuantizedCpuTest, DecodeAfterPrefillMatchesOnePrefill) {
  cpu::ThreadPool pool(2);
  const Shape s = {9, 4, 8, 2, 64};
  const KvCacheTypes types = {GgmlType::kQ4_0, GgmlType::kQ8_0};
  const QuantizedInputs in = testing::RandomQuantizedInputs(s, types, 31);
  const std::vector<float> all = RunCpu(in, testing::QuantizedParamsFor(s, types), {&pool, cpu::DetectSimd()});
  const size_t token = static_cast<size_t>(s.n_heads) * s.head_dim;
  for (int t = 0; t < s.n_tokens; ++t) {
    QuantizedInputs one = in;
    one.q.assign(in.q.begin() + t * token, in.q.begin() + (t + 1) * token);
    const Shape alone = {1, s.first_pos + t, s.n_heads, s.n_kv_heads, s.head_dim};
    const std::vector<float> got = RunCpu(one, testing::QuantizedParamsFor(alone, types), {&pool, cpu::DetectSimd()});
    EXPECT_EQ(std::memcmp(got.data(), all.data() + t * token, token * sizeof(float)), 0) << "token " << t;
  }
}

// The AVX2 pair decodes whole blocks with vector instructions: the same
// floats as the portable pair's scalar decoder, bit for bit, for heads on
// block edges and heads across them.
TEST(AttentionQuantizedCpuTest, Avx2DecodesTheRowsBitForBit) {
  if (cpu::DetectSimd() != cpu::Simd::kAvx2) GTEST_SKIP() << "no AVX2";
  const cpu::AttentionKernels portable = cpu::PortableAttentionKernels(), avx2 = cpu::Avx2AttentionKernels();
  const int kv_dim = 256, n_rows = 5;
  const std::vector<float> values = testing::RandomVector(n_rows * kv_dim, -3, 2, 9);
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1}) {
    std::vector<uint8_t> rows(n_rows * RowBytes(type, kv_dim));
    ASSERT_TRUE(cpu::KvAppend(values.data(), values.data(), n_rows, kv_dim, rows.data(), rows.data(), 0, {type, type})
                    .ok());
    for (const auto& [first, head_dim] : {std::pair{0, 128}, std::pair{128, 64}, std::pair{48, 16}, std::pair{8, 40}}) {
      std::vector<float> want(n_rows * head_dim), got(want.size());
      portable.decode_rows(type, rows.data(), RowBytes(type, kv_dim), n_rows, first, head_dim, want.data());
      avx2.decode_rows(type, rows.data(), RowBytes(type, kv_dim), n_rows, first, head_dim, got.data());
      EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
          << GgmlTypeName(type) << " first " << first << " head_dim " << head_dim;
    }
  }
}

TEST(AttentionQuantizedCpuTest, RejectsTypesThatDoNotFitTheRows) {
  float q[48] = {}, out[48] = {};
  uint8_t cache[256] = {};
  AttentionParams p = testing::QuantizedParamsFor({1, 0, 2, 2, 24}, {GgmlType::kQ8_0, GgmlType::kF16});
  absl::Status status = cpu::Attention(q, cache, cache, out, p, {});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("Attention: types.k: a q8_0 cache needs rows of a multiple of 32 values; this "
                                  "model's are 48"),
            std::string::npos)
      << status;
  p.types = {GgmlType::kF16, GgmlType::kQ6_K};
  status = cpu::Attention(q, cache, cache, out, p, {});
  EXPECT_NE(status.message().find("types.v: Q6_K is not a KV cache type"), std::string::npos) << status;
}

}  // namespace
}  // namespace octo
