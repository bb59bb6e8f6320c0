// Non-causal (bidirectional) attention on the CPU, as an encoder runs it:
// every query sees every row of the call. Against a double-precision
// reference; each query bit for bit the causal op's query at the call's
// last position (ops.h); an early query seeing a later row, which causal
// attention never allows; a tree_mask refused.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/half.h"
#include "kernels/ops.h"
#include "tests/kernels/attention_test_util.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/quantized_kv_test_util.h"

namespace octo {
namespace {

using Shape = testing::AttentionShape;
using Inputs = testing::AttentionInputs;
using testing::Describe;
using testing::ParamsFor;

// As attention_test.cc's bound against the double reference (its derivation
// holds for any set of visible rows): 1e-5 absolute; plus, per element, what
// a softmax weight within rounding of an fp16 midpoint may move it when the
// op's float weight rounds to the other side (AttentionReference's flip:
// with few rows a weight is large and its fp16 ulp up to 2.4e-4).
constexpr double kRefTol = 1e-5;

AttentionParams NonCausal(const Shape& s) {
  AttentionParams p = ParamsFor(s);
  p.causal = false;
  return p;
}

std::vector<float> RunAttention(const float* q, const void* k, const void* v, size_t q_size, const AttentionParams& p,
                       const cpu::Exec& exec) {
  std::vector<float> out(q_size, -7.0f);
  const absl::Status status = cpu::Attention(q, k, v, out.data(), p, exec);
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

std::vector<float> RunNonCausal(const Inputs& in, const Shape& s, const cpu::Exec& exec) {
  return RunAttention(in.q.data(), in.k.data(), in.v.data(), in.q.size(), NonCausal(s), exec);
}

std::vector<cpu::Simd> SimdModes() {
  std::vector<cpu::Simd> modes = {cpu::Simd::kPortable};
  if (cpu::DetectSimd() == cpu::Simd::kAvx2) modes.push_back(cpu::Simd::kAvx2);
  return modes;
}

// Query t of s alone, as a causal query at the call's last position.
Shape LastPosition(const Shape& s) { return {1, s.first_pos + s.n_tokens - 1, s.n_heads, s.n_kv_heads, s.head_dim}; }

// The contract in double: each query sees all first_pos + n_tokens rows,
// which is the causal reference of the query alone at the last position.
// flip: the allowance per element (above).
std::vector<double> Reference(const Inputs& in, const Shape& s, std::vector<double>* flip) {
  const size_t token = static_cast<size_t>(s.n_heads) * s.head_dim;
  std::vector<float> k(in.k.size()), v(in.v.size());
  for (size_t i = 0; i < k.size(); ++i) k[i] = Fp16ToFp32(in.k[i]);
  for (size_t i = 0; i < v.size(); ++i) v[i] = Fp16ToFp32(in.v[i]);
  std::vector<double> out;
  flip->clear();
  for (int t = 0; t < s.n_tokens; ++t) {
    const std::vector<float> q(in.q.begin() + t * token, in.q.begin() + (t + 1) * token);
    std::vector<double> one_flip;
    const std::vector<double> one =
        testing::AttentionReference(q, k, v, LastPosition(s), /*round_q=*/true, /*round_weights=*/true, &one_flip);
    out.insert(out.end(), one.begin(), one.end());
    flip->insert(flip->end(), one_flip.begin(), one_flip.end());
  }
  return out;
}

// head_dim 1, 33, 64; GQA 1, 2, 4; from position 0 and after a context.
constexpr Shape kShapes[] = {{1, 0, 1, 1, 1}, {7, 0, 8, 2, 64}, {5, 3, 6, 3, 33}, {12, 20, 4, 1, 16}};

TEST(AttentionNonCausalCpuTest, MatchesDoublePrecisionReference) {
  cpu::ThreadPool pool(2);
  uint32_t seed = 1;
  for (const Shape& s : kShapes) {
    const Inputs in = testing::RandomAttentionInputs(s, seed++);
    std::vector<double> flip;
    const std::vector<double> want = Reference(in, s, &flip);
    for (cpu::Simd simd : SimdModes()) {
      const std::vector<float> got = RunNonCausal(in, s, {&pool, simd});
      ASSERT_EQ(got.size(), want.size());
      size_t misses = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        if (!(std::abs(got[i] - want[i]) <= kRefTol + flip[i]) && misses++ == 0) {
          ADD_FAILURE() << Describe(s) << ": element " << i << ": got " << got[i] << ", want " << want[i];
        }
      }
      EXPECT_EQ(misses, 0u) << Describe(s) << " simd=" << cpu::SimdName(simd);
    }
  }
}

// ops.h: a non-causal query is the causal op's query at the last position,
// bit for bit, on both instruction sets, on a pool, over fp16 and quantized
// caches.
TEST(AttentionNonCausalCpuTest, EachQueryIsTheCausalQueryAtTheLastPositionBitForBit) {
  cpu::ThreadPool pool(3);
  const Shape s = {9, 4, 8, 2, 32};
  const size_t token = static_cast<size_t>(s.n_heads) * s.head_dim;
  for (KvCacheTypes types : {KvCacheTypes{}, KvCacheTypes{GgmlType::kQ8_0, GgmlType::kQ4_0}}) {
    const testing::QuantizedInputs in = testing::RandomQuantizedInputs(s, types, 11);
    for (cpu::Simd simd : SimdModes()) {
      const cpu::Exec exec = {&pool, simd};
      AttentionParams p = testing::QuantizedParamsFor(s, types);
      p.causal = false;
      const std::vector<float> all = RunAttention(in.q.data(), in.k.data(), in.v.data(), in.q.size(), p, exec);
      for (int t = 0; t < s.n_tokens; ++t) {
        const AttentionParams last = testing::QuantizedParamsFor(LastPosition(s), types);
        const std::vector<float> alone =
            RunAttention(in.q.data() + t * token, in.k.data(), in.v.data(), token, last, exec);
        testing::ExpectSameBits(alone, std::vector<float>(all.begin() + t * token, all.begin() + (t + 1) * token),
                                testing::Describe(types) + " token " + std::to_string(t) +
                                    " simd=" + cpu::SimdName(simd));
      }
    }
  }
}

// What a user of an encoder notices: the first token's output depends on
// the last token. Changing the last row changes every query's output when
// non-causal; causal, only the last query's.
TEST(AttentionNonCausalCpuTest, EarlyQueriesSeeLaterRows) {
  const Shape s = {6, 0, 4, 2, 32};
  const Inputs in = testing::RandomAttentionInputs(s, 5);
  Inputs changed = in;
  const size_t row = static_cast<size_t>(s.n_kv_heads) * s.head_dim;
  const size_t last = static_cast<size_t>(s.first_pos + s.n_tokens - 1);
  for (size_t i = last * row; i < (last + 1) * row; ++i) {
    changed.k[i] = Fp32ToFp16(0.5f - Fp16ToFp32(in.k[i]));
    changed.v[i] = Fp32ToFp16(2.0f + Fp16ToFp32(in.v[i]));
  }
  const size_t token = static_cast<size_t>(s.n_heads) * s.head_dim;
  auto token_changed = [&](const std::vector<float>& a, const std::vector<float>& b, int t) {
    return !std::equal(a.begin() + t * token, a.begin() + (t + 1) * token, b.begin() + t * token);
  };
  const std::vector<float> before = RunNonCausal(in, s, {});
  const std::vector<float> after = RunNonCausal(changed, s, {});
  const std::vector<float> causal_before =
      RunAttention(in.q.data(), in.k.data(), in.v.data(), in.q.size(), ParamsFor(s), {});
  const std::vector<float> causal_after =
      RunAttention(changed.q.data(), changed.k.data(), changed.v.data(), changed.q.size(), ParamsFor(s), {});
  for (int t = 0; t < s.n_tokens; ++t) {
    EXPECT_TRUE(token_changed(before, after, t)) << "non-causal token " << t;
    EXPECT_EQ(token_changed(causal_before, causal_after, t), t == s.n_tokens - 1) << "causal token " << t;
  }
}

// A tree query sees its ancestors only: a tree_mask with causal false is
// INVALID_ARGUMENT naming both, and nothing is written.
TEST(AttentionNonCausalCpuTest, RejectsATreeMask) {
  const Shape s = {3, 4, 4, 2, 8};
  const Inputs in = testing::RandomAttentionInputs(s, 2);
  const std::vector<uint64_t> mask = {1, 3, 5};
  AttentionParams p = testing::TreeParamsFor(s, mask.data());
  p.causal = false;
  std::vector<float> out(in.q.size(), -7.0f);
  const absl::Status status = cpu::Attention(in.q.data(), in.k.data(), in.v.data(), out.data(), p, {});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("Attention: a tree_mask needs causal"), std::string::npos) << status;
  for (float f : out) ASSERT_EQ(f, -7.0f) << "a rejected call wrote to out";
}

}  // namespace
}  // namespace octo
