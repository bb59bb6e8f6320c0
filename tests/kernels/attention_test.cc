// Attention: the CPU version against a double-precision reference, and the
// properties the engine relies on: GQA head mapping, causality, decode after
// prefill equal to one prefill, independence from the pool size, AVX2 close to
// portable; tree attention equal bit for bit to causal attention over the
// compacted cache.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/half.h"
#include "kernels/ops.h"
#include "tests/kernels/attention_test_util.h"
#include "tests/kernels/quantized_kv_test_util.h"

namespace octo {
namespace {

// Against the double reference, per element, absolute (values lie in
// [-1, 1], so outputs do too): 1e-5. The op's float steps are the q·k sum of
// head_dim exact products, the score's scale, the softmax (7e-7 relative, see
// softmax_test.cc) and the value sum over up to 4096 positions; float sums of
// n terms with independent roundings err by about sqrt(n) * 2^-24 of their
// magnitude. Measured over these shapes (29 seeds): 5.9e-7 portable, 1.9e-7
// AVX2. 1e-5 leaves room and still catches a q not rounded to fp16 (3.8e-4),
// a missing or extra cache row, or a wrong kv head.
constexpr double kRefTol = 1e-5;
// AVX2 vs portable: only the dot's summation order and fused multiply-adds
// differ. Measured 6.3e-7 at worst; 4e-6 leaves room.
constexpr double kSimdTol = 4e-6;

using Shape = testing::AttentionShape;
using Inputs = testing::AttentionInputs;
using testing::Describe;
using testing::kFp16NaN;
using testing::ParamsFor;

Inputs RandomInputs(const Shape& s, uint32_t seed) { return testing::RandomAttentionInputs(s, seed); }

std::vector<float> RunAttention(const Inputs& in, const Shape& s, const cpu::Exec& exec) {
  std::vector<float> out(in.q.size(), -7.0f);
  const absl::Status status =
      cpu::Attention(in.q.data(), in.k.data(), in.v.data(), out.data(), ParamsFor(s), exec);
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// The contract of ops.h in double: q and the softmax weights rounded to fp16
// (part of the contract), everything else exact up to double rounding.
std::vector<double> Reference(const Inputs& in, const Shape& s) {
  auto widen = [&](const std::vector<uint16_t>& cache) {
    std::vector<float> out((s.first_pos + s.n_tokens) * static_cast<size_t>(s.n_kv_heads) * s.head_dim);
    for (size_t i = 0; i < out.size(); ++i) out[i] = Fp16ToFp32(cache[i]);
    return out;
  };
  return testing::AttentionReference(in.q, widen(in.k), widen(in.v), s, /*round_q=*/true, /*round_weights=*/true);
}

template <typename Want>
void ExpectClose(const std::vector<float>& got, const std::vector<Want>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t misses = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = std::abs(got[i] - static_cast<double>(want[i]));
    if (!(diff <= tol) && misses++ == 0) {
      ADD_FAILURE() << what << ": element " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(misses, 0u) << what;
}

std::vector<cpu::Simd> SimdModes() {
  std::vector<cpu::Simd> modes = {cpu::Simd::kPortable};
  if (cpu::DetectSimd() == cpu::Simd::kAvx2) modes.push_back(cpu::Simd::kAvx2);
  return modes;
}

// head_dim 1, odd (33), 64, 80, 128; GQA ratios 1, 2, 3, 8; prefill from 0
// and after earlier tokens; long decodes.
constexpr Shape kShapes[] = {{1, 0, 1, 1, 1},     {1, 0, 4, 4, 64},    {3, 5, 8, 4, 128},
                             {7, 0, 8, 1, 64},    {5, 3, 6, 2, 33},    {17, 0, 4, 2, 80},
                             {1, 2000, 8, 2, 128}, {1, 4095, 2, 1, 128}, {40, 0, 2, 1, 16}};

TEST(AttentionCpuTest, MatchesDoublePrecisionReference) {
  cpu::ThreadPool pool(2);
  uint32_t seed = 1;
  for (const Shape& s : kShapes) {
    const Inputs in = RandomInputs(s, seed++);
    const std::vector<double> want = Reference(in, s);
    for (cpu::Simd simd : SimdModes()) {
      ExpectClose(RunAttention(in, s, {&pool, simd}), want, kRefTol,
                  Describe(s) + " simd=" + cpu::SimdName(simd));
    }
  }
}

// Every value row of kv head j holds j + 1, so the output of query head h is
// (h / group + 1) times the sum of its weights, which is 1 to within the fp16
// rounding of each weight (2^-11 relative): the output names the kv head the
// query head read (a neighbour's value is off by 1/8 or more).
// first_pos_at: the position read when the op runs gives the passed
// position's bits; a step past max_ctx is refused.
TEST(AttentionCpuTest, APositionReadWhenTheOpRunsGivesThePassedPositionsBits) {
  const testing::AttentionShape s = {1, 300, 4, 2, 64};
  const testing::AttentionInputs in = testing::RandomAttentionInputs(s, 5);
  std::vector<float> want(in.q.size()), got(in.q.size());
  ASSERT_TRUE(cpu::Attention(in.q.data(), in.k.data(), in.v.data(), want.data(), ParamsFor(s), {}).ok());
  const int32_t position = 300;
  AttentionParams p = ParamsFor(s);
  p.first_pos = 0;
  p.first_pos_at = &position;
  p.max_ctx = 512;
  ASSERT_TRUE(cpu::Attention(in.q.data(), in.k.data(), in.v.data(), got.data(), p, {}).ok());
  EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0);
  p.max_ctx = 300;
  const absl::Status past = cpu::Attention(in.q.data(), in.k.data(), in.v.data(), got.data(), p, {});
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument) << past;
  EXPECT_NE(past.message().find("max_ctx"), std::string::npos) << past;
}

TEST(AttentionCpuTest, QueryHeadsReadTheirGroupsKvHead) {
  const int n_heads = 8;
  for (int n_kv_heads : {8, 4, 1}) {
    const Shape s = {3, 4, n_heads, n_kv_heads, 16};
    Inputs in = RandomInputs(s, 40 + n_kv_heads);
    for (size_t i = 0; i < in.v.size(); ++i) {
      const int kv_h = static_cast<int>(i / s.head_dim % n_kv_heads);
      in.v[i] = Fp32ToFp16(static_cast<float>(kv_h + 1));
    }
    const std::vector<float> out = RunAttention(in, s, {});
    const int group = n_heads / n_kv_heads;
    for (size_t i = 0; i < out.size(); ++i) {
      const int h = static_cast<int>(i / s.head_dim % n_heads);
      ASSERT_NEAR(out[i], h / group + 1, 2e-3 * (h / group + 1)) << Describe(s) << " head " << h;
    }
  }
}

// q == 0 scores every row 0: the weights are uniform and the output is the
// mean of the visible value rows.
TEST(AttentionCpuTest, EqualScoresAverageTheVisibleValues) {
  const Shape s = {4, 6, 2, 1, 8};
  Inputs in = RandomInputs(s, 3);
  std::fill(in.q.begin(), in.q.end(), 0.0f);
  const std::vector<float> out = RunAttention(in, s, {});
  for (int t = 0; t < s.n_tokens; ++t) {
    const int n_ctx = s.first_pos + t + 1;
    for (int h = 0; h < s.n_heads; ++h) {
      for (int d = 0; d < s.head_dim; ++d) {
        // Each weight is 1/n_ctx in float, then rounded to fp16.
        const double weight = Fp16ToFp32(Fp32ToFp16(1.0f / static_cast<float>(n_ctx)));
        double mean = 0;
        for (int pos = 0; pos < n_ctx; ++pos) mean += weight * Fp16ToFp32(in.v[pos * s.head_dim + d]);
        EXPECT_NEAR(out[(t * s.n_heads + h) * s.head_dim + d], mean, 1e-6)
            << "token " << t << " head " << h << " d " << d;
      }
    }
  }
}

// Changing cache row r changes the outputs of the queries at positions >= r
// and leaves those before it bit for bit.
TEST(AttentionCpuTest, QueriesDoNotSeeLaterRows) {
  const Shape s = {6, 2, 4, 2, 32};
  const Inputs in = RandomInputs(s, 5);
  const std::vector<float> before = RunAttention(in, s, {});
  const int changed_token = 3;
  const int row = s.first_pos + changed_token;
  Inputs changed = in;
  const size_t row_size = static_cast<size_t>(s.n_kv_heads) * s.head_dim;
  for (size_t i = row * row_size; i < (row + 1) * row_size; ++i) {
    changed.k[i] = Fp32ToFp16(0.5f - Fp16ToFp32(in.k[i]));
    changed.v[i] = Fp32ToFp16(2.0f + Fp16ToFp32(in.v[i]));
  }
  const std::vector<float> after = RunAttention(changed, s, {});
  const size_t token_size = static_cast<size_t>(s.n_heads) * s.head_dim;
  for (int t = 0; t < s.n_tokens; ++t) {
    const bool same = std::equal(before.begin() + t * token_size,
                                 before.begin() + (t + 1) * token_size,
                                 after.begin() + t * token_size);
    EXPECT_EQ(same, t < changed_token) << "token " << t << " at position " << s.first_pos + t;
  }
}

// Decoding token t alone (n_tokens 1, first_pos + t) over a cache whose rows
// after it are NaN gives bit for bit the row t of one prefill of all tokens:
// what the engine does after a prefill must not drift from it.
TEST(AttentionCpuTest, DecodeAfterPrefillMatchesOnePrefill) {
  cpu::ThreadPool pool(3);
  for (int first_pos : {0, 9}) {
    const Shape prefill = {12, first_pos, 8, 2, 64};
    const Inputs in = RandomInputs(prefill, 60 + first_pos);
    for (cpu::Simd simd : SimdModes()) {
      const cpu::Exec exec = {&pool, simd};
      const std::vector<float> all = RunAttention(in, prefill, exec);
      const size_t token_size = static_cast<size_t>(prefill.n_heads) * prefill.head_dim;
      const size_t row_size = static_cast<size_t>(prefill.n_kv_heads) * prefill.head_dim;
      for (int t = 0; t < prefill.n_tokens; ++t) {
        const Shape decode = {1, first_pos + t, prefill.n_heads, prefill.n_kv_heads,
                              prefill.head_dim};
        Inputs one = in;
        one.q.assign(in.q.begin() + t * token_size, in.q.begin() + (t + 1) * token_size);
        std::fill(one.k.begin() + (first_pos + t + 1) * row_size, one.k.end(), kFp16NaN);
        std::fill(one.v.begin() + (first_pos + t + 1) * row_size, one.v.end(), kFp16NaN);
        const std::vector<float> alone = RunAttention(one, decode, exec);
        EXPECT_TRUE(std::equal(alone.begin(), alone.end(), all.begin() + t * token_size))
            << Describe(decode) << " simd=" << cpu::SimdName(simd);
      }
    }
  }
}

TEST(AttentionCpuTest, ResultsDoNotDependOnThePool) {
  const Shape s = {9, 30, 8, 2, 64};
  const Inputs in = RandomInputs(s, 77);
  for (cpu::Simd simd : SimdModes()) {
    const std::vector<float> alone = RunAttention(in, s, {nullptr, simd});
    for (int n_threads : {1, 2, 3}) {
      cpu::ThreadPool pool(n_threads);
      EXPECT_EQ(RunAttention(in, s, {&pool, simd}), alone)
          << n_threads << " threads, simd=" << cpu::SimdName(simd);
    }
  }
}

TEST(AttentionCpuTest, Avx2IsCloseToPortable) {
  if (cpu::DetectSimd() != cpu::Simd::kAvx2) GTEST_SKIP() << "this CPU has no AVX2/FMA/F16C";
  uint32_t seed = 200;
  for (const Shape& s : kShapes) {
    const Inputs in = RandomInputs(s, seed++);
    ExpectClose(RunAttention(in, s, {nullptr, cpu::Simd::kAvx2}),
                RunAttention(in, s, {nullptr, cpu::Simd::kPortable}), kSimdTol, Describe(s));
  }
}

TEST(AttentionCpuTest, OutMayBeQ) {
  const Shape s = {5, 3, 4, 2, 24};
  const Inputs in = RandomInputs(s, 8);
  const std::vector<float> want = RunAttention(in, s, {});
  std::vector<float> q = in.q;
  ASSERT_TRUE(cpu::Attention(q.data(), in.k.data(), in.v.data(), q.data(), ParamsFor(s), {}).ok());
  EXPECT_EQ(q, want);
}

// --- Tree attention ----------------------------------------------------------

std::vector<float> RunTree(const Inputs& in, const Shape& s, const std::vector<uint64_t>& mask,
                           const cpu::Exec& exec) {
  std::vector<float> out(in.q.size(), -7.0f);
  const absl::Status status = cpu::Attention(in.q.data(), in.k.data(), in.v.data(), out.data(),
                                             testing::TreeParamsFor(s, mask.data()), exec);
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// The tree contract (ops.h), which speculative decoding relies on to give
// the plain decoding's tokens: every tree query's output is, bit for bit,
// the causal op's for the last query of a cache holding [0, tree_base),
// then that query's ancestors and itself. Trees of 20 to 40 nodes, long
// chains and bushy ones, after no context, a short and a long one; GQA,
// head_dim 64, 33 (AVX2's scalar tail) and 40 (its 8-wide step); both
// instruction sets, on a pool.
TEST(AttentionCpuTest, TreeQueriesMatchTheCausalOpOnTheCompactedCacheBitForBit) {
  cpu::ThreadPool pool(3);
  struct Case {
    int n_nodes;
    int tree_base;
    int max_depth;
    double chain_bias;
    int n_heads, n_kv_heads, head_dim;
  };
  const Case cases[] = {{20, 0, 20, 0.8, 8, 2, 64},  {31, 5, 6, 0.3, 6, 2, 33},
                        {40, 300, 12, 0.5, 4, 1, 40}, {40, 7, 40, 0.0, 8, 8, 16},
                        {64, 2, 64, 1.0, 2, 1, 8}};
  uint32_t seed = 500;
  for (const Case& c : cases) {
    const Shape s = {c.n_nodes, c.tree_base, c.n_heads, c.n_kv_heads, c.head_dim};
    const testing::DraftTree tree =
        testing::RandomDraftTree(c.n_nodes, c.max_depth, c.chain_bias, seed);
    const Inputs in = testing::RandomAttentionInputs(s, seed++, /*extra_rows=*/3);
    for (cpu::Simd simd : SimdModes()) {
      const cpu::Exec exec = {&pool, simd};
      const std::vector<float> got = RunTree(in, s, tree.mask, exec);
      const size_t token_size = static_cast<size_t>(s.n_heads) * s.head_dim;
      for (int t = 0; t < s.n_tokens; ++t) {
        const uint64_t mask = tree.mask[t];
        const Shape compact = testing::CompactedShape(s, c.tree_base, mask);
        const std::vector<float> want =
            RunAttention(testing::CompactTreeQuery(in, s, c.tree_base, mask, t), compact, exec);
        const float* got_t = got.data() + t * token_size;
        EXPECT_EQ(std::memcmp(want.data(), got_t, token_size * sizeof(float)), 0)
            << Describe(s) << " depth " << tree.depth << " simd=" << cpu::SimdName(simd)
            << ": query " << t << " (mask " << std::hex << mask << std::dec << ") vs "
            << Describe(compact);
      }
    }
  }
}

// The causal mask written as a tree (row t sees bits 0..t, tree_base =
// first_pos) is the causal op, bit for bit; 64 rows reach bit 63.
TEST(AttentionCpuTest, CausalTreeMaskGivesTheCausalBits) {
  cpu::ThreadPool pool(2);
  const Shape shapes[] = {{12, 0, 8, 2, 64}, {64, 9, 4, 2, 33}, {5, 300, 2, 1, 128}};
  for (const Shape& s : shapes) {
    const Inputs in = RandomInputs(s, 90 + s.first_pos);
    const std::vector<uint64_t> mask = testing::CausalTreeMask(s.n_tokens);
    for (cpu::Simd simd : SimdModes()) {
      const cpu::Exec exec = {&pool, simd};
      const std::vector<float> tree = RunTree(in, s, mask, exec);
      const std::vector<float> causal = RunAttention(in, s, exec);
      EXPECT_EQ(std::memcmp(tree.data(), causal.data(), causal.size() * sizeof(float)), 0)
          << Describe(s) << " simd=" << cpu::SimdName(simd);
    }
  }
}

// The tree limits (op_checks.h), and a zero mask, which the CPU can read:
// INVALID_ARGUMENT naming the field, nothing written.
TEST(AttentionCpuTest, RejectsBadTreeArguments) {
  const Shape ok = {3, 4, 4, 2, 8};
  const Inputs in = RandomInputs(ok, 2);
  std::vector<float> out(in.q.size(), -7.0f);
  const std::vector<uint64_t> mask = {1, 3, 5};
  const std::vector<uint64_t> zero_second = {1, 0, 5};
  const std::vector<uint64_t> long_mask(65, 1);
  struct Case {
    AttentionParams p;
    const char* names;
  };
  auto with = [&](const std::vector<uint64_t>& m, auto change) {
    AttentionParams p = testing::TreeParamsFor(ok, m.data());
    change(p);
    return p;
  };
  const Case cases[] = {
      // q and out hold 3 rows, but nothing is read past the checks.
      {with(long_mask, [](AttentionParams& p) { p.n_tokens = 65; }),
       "n_tokens (65) must be <= kMaxTreeAttentionRows (64)"},
      {with(mask, [](AttentionParams& p) { p.tree_base = -1; }), "tree_base (-1)"},
      {with(mask, [](AttentionParams& p) { p.tree_base = INT_MAX - 63; }),
       "tree_base (2147483584)"},
      {with(zero_second, [](AttentionParams&) {}), "tree_mask[1] is 0"},
  };
  for (const Case& c : cases) {
    const absl::Status status =
        cpu::Attention(in.q.data(), in.k.data(), in.v.data(), out.data(), c.p, {});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.names << ": " << status;
    EXPECT_NE(status.message().find("Attention"), std::string::npos) << status;
    EXPECT_NE(status.message().find(c.names), std::string::npos) << status;
  }
  for (float f : out) ASSERT_EQ(f, -7.0f) << "a rejected call wrote to out";
}

TEST(AttentionCpuTest, RejectsBadArguments) {
  const Shape ok = {2, 1, 4, 2, 8};
  const Inputs in = RandomInputs(ok, 1);
  std::vector<float> out(in.q.size(), -7.0f);
  struct Case {
    const float* q;
    const uint16_t* k;
    const uint16_t* v;
    float* out;
    AttentionParams p;
    const char* names;  // what the message must name
  };
  auto with = [&](auto change) {
    AttentionParams p = ParamsFor(ok);
    change(p);
    return p;
  };
  const AttentionParams good = ParamsFor(ok);
  const Case cases[] = {
      {nullptr, in.k.data(), in.v.data(), out.data(), good, "q is null"},
      {in.q.data(), nullptr, in.v.data(), out.data(), good, "k_cache is null"},
      {in.q.data(), in.k.data(), nullptr, out.data(), good, "v_cache is null"},
      {in.q.data(), in.k.data(), in.v.data(), nullptr, good, "out is null"},
      {in.q.data(), in.k.data(), in.v.data(), out.data(),
       with([](AttentionParams& p) { p.n_tokens = 0; }), "n_tokens (0)"},
      {in.q.data(), in.k.data(), in.v.data(), out.data(),
       with([](AttentionParams& p) { p.n_heads = -4; }), "n_heads (-4)"},
      {in.q.data(), in.k.data(), in.v.data(), out.data(),
       with([](AttentionParams& p) { p.n_kv_heads = 0; }), "n_kv_heads (0)"},
      {in.q.data(), in.k.data(), in.v.data(), out.data(),
       with([](AttentionParams& p) { p.n_kv_heads = 3; }),
       "n_kv_heads (3) must divide n_heads (4)"},
      {in.q.data(), in.k.data(), in.v.data(), out.data(),
       with([](AttentionParams& p) { p.head_dim = 0; }), "head_dim (0)"},
      {in.q.data(), in.k.data(), in.v.data(), out.data(),
       with([](AttentionParams& p) { p.first_pos = -1; }), "first_pos (-1)"},
      {in.q.data(), in.k.data(), in.v.data(), out.data(),
       with([](AttentionParams& p) { p.first_pos = 2147483647; }), "first_pos (2147483647)"},
      {in.q.data(), in.k.data(), in.v.data(), out.data(),
       with([](AttentionParams& p) { p.scale = NAN; }), "scale (nan)"},
  };
  for (const Case& c : cases) {
    const absl::Status status = cpu::Attention(c.q, c.k, c.v, c.out, c.p, {});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.names << ": " << status;
    EXPECT_NE(status.message().find("Attention"), std::string::npos) << status;
    EXPECT_NE(status.message().find(c.names), std::string::npos) << status;
  }
  for (float f : out) ASSERT_EQ(f, -7.0f) << "a rejected call wrote to out";
}

}  // namespace
}  // namespace octo
