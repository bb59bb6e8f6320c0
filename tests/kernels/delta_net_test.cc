// cpu::DeltaNetConv, GatedDeltaRule, SplitGatedQuery and SigmoidMul against
// plain double computations of their formulas (kernels/ops.h), with the
// state carried across calls: a sequence split into several calls must give
// the bits of one call.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/thread_pool.h"
#include "kernels/ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

using testing::ExpectClose;
using testing::ExpectSameBits;
using testing::RandomVector;

// Float against double over sums of at most 256 terms of size ~1: 1e-5
// relative, plus an absolute floor for values near 0.
constexpr testing::Tolerance kVsDouble = {1e-5, 1e-6};

double SigmoidD(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(DeltaNetConvTest, MatchesTheFormulaAndCarriesItsStateAcrossCalls) {
  const int tokens = 7, channels = 70, kernel = 4;
  const std::vector<float> x = RandomVector(tokens * channels, -2, 2, 1);
  const std::vector<float> taps = RandomVector(channels * kernel, -1, 1, 2);
  const std::vector<float> state = RandomVector((kernel - 1) * channels, -2, 2, 3);
  std::vector<double> want(tokens * channels);
  for (int c = 0; c < channels; ++c) {
    std::vector<double> inputs;  // the earlier inputs, then the tokens
    for (int j = 0; j < kernel - 1; ++j) inputs.push_back(state[j * channels + c]);
    for (int t = 0; t < tokens; ++t) inputs.push_back(x[t * channels + c]);
    for (int t = 0; t < tokens; ++t) {
      double sum = 0;
      for (int j = 0; j < kernel; ++j) sum += taps[c * kernel + j] * inputs[t + j];
      want[t * channels + c] = sum * SigmoidD(sum);
    }
  }
  std::vector<float> out(tokens * channels), state_out(state.size());
  ASSERT_TRUE(cpu::DeltaNetConv(x.data(), taps.data(), state.data(), state_out.data(), out.data(),
                                {.n_tokens = tokens, .channels = channels, .kernel = kernel}, cpu::Exec{})
                  .ok());
  ExpectClose(out, want, channels, kVsDouble, "one call");
  // The state is the last kernel - 1 inputs.
  for (int j = 0; j < kernel - 1; ++j) {
    for (int c = 0; c < channels; ++c) {
      EXPECT_EQ(state_out[j * channels + c], x[(tokens - kernel + 1 + j) * channels + c]);
    }
  }
  // 3 tokens, then 4 from the state the first call left (in place).
  std::vector<float> split(tokens * channels), carried = state;
  ASSERT_TRUE(cpu::DeltaNetConv(x.data(), taps.data(), carried.data(), carried.data(), split.data(),
                                {.n_tokens = 3, .channels = channels, .kernel = kernel}, cpu::Exec{})
                  .ok());
  ASSERT_TRUE(cpu::DeltaNetConv(x.data() + 3 * channels, taps.data(), carried.data(), carried.data(),
                                split.data() + 3 * channels, {.n_tokens = 4, .channels = channels, .kernel = kernel}, cpu::Exec{})
                  .ok());
  ExpectSameBits(split, out, "3 + 4 tokens");
  ExpectSameBits(carried, state_out, "the carried state");
}

// The formula in double, for a (k_heads, v_heads) layout and mapping.
std::vector<double> DeltaRuleInDouble(const std::vector<float>& qkv, const std::vector<float>& b,
                                      const std::vector<float>& a, const std::vector<float>& dt_bias,
                                      const std::vector<float>& decay, std::vector<double>& state,
                                      const GatedDeltaRuleParams& p) {
  const int d = p.head_dim, r = p.v_heads / p.k_heads;
  std::vector<double> out(size_t(p.n_tokens) * p.v_heads * d);
  for (int t = 0; t < p.n_tokens; ++t) {
    for (int h = 0; h < p.v_heads; ++h) {
      const int kh = p.grouped_heads ? h / r : h % p.k_heads;
      std::vector<double> q(d), k(d), v(d);
      double qs = 0, ks = 0;
      for (int i = 0; i < d; ++i) {
        q[i] = qkv[t * p.qkv_stride + kh * d + i];
        k[i] = qkv[t * p.qkv_stride + (p.k_heads + kh) * d + i];
        v[i] = qkv[t * p.qkv_stride + (2 * p.k_heads + h) * d + i];
        qs += q[i] * q[i];
        ks += k[i] * k[i];
      }
      for (int i = 0; i < d; ++i) {
        q[i] /= std::max(std::sqrt(qs), double(p.eps));
        k[i] /= std::max(std::sqrt(ks), double(p.eps));
      }
      const int b_at = p.grouped_ba ? (h / r) * 2 * r + h % r : h;
      const int a_at = p.grouped_ba ? b_at + r : h;
      const double beta = SigmoidD(b[t * p.ba_stride + b_at]);
      const double x = a[t * p.ba_stride + a_at] + dt_bias[h];
      const double g = (x > 20 ? x : std::log1p(std::exp(x))) * decay[h];
      double* s = &state[size_t(h) * d * d];
      for (int e = 0; e < d * d; ++e) s[e] *= std::exp(g);
      std::vector<double> delta(d);
      for (int j = 0; j < d; ++j) {
        double mem = 0;
        for (int i = 0; i < d; ++i) mem += s[i * d + j] * k[i];
        delta[j] = (v[j] - mem) * beta;
      }
      for (int i = 0; i < d; ++i) {
        for (int j = 0; j < d; ++j) s[i * d + j] += k[i] * delta[j];
      }
      for (int j = 0; j < d; ++j) {
        double acc = 0;
        for (int i = 0; i < d; ++i) acc += s[i * d + j] * q[i];
        out[(size_t(t) * p.v_heads + h) * d + j] = acc / std::sqrt(double(d));
      }
    }
  }
  return out;
}

TEST(GatedDeltaRuleTest, MatchesTheFormulaForEitherHeadMappingAndSplitsExactly) {
  for (const bool grouped : {false, true}) {
    SCOPED_TRACE(grouped ? "qwen3next: grouped heads, fused b/a" : "qwen35: cycled heads, separate b and a");
    GatedDeltaRuleParams p{.n_tokens = 6, .k_heads = 2, .v_heads = 6, .head_dim = 32, .grouped_heads = grouped,
                           .grouped_ba = grouped, .eps = 1e-6f};
    p.qkv_stride = int64_t{2 * p.k_heads + p.v_heads} * p.head_dim + 5;  // a padded row, as a caller may have
    p.ba_stride = grouped ? 2 * p.v_heads : p.v_heads;
    const std::vector<float> qkv = RandomVector(p.n_tokens * p.qkv_stride, -1, 1, 10);
    const std::vector<float> b = RandomVector(p.n_tokens * p.ba_stride, -3, 3, 11);
    const std::vector<float> a = grouped ? b : RandomVector(p.n_tokens * p.ba_stride, -3, 3, 12);
    const std::vector<float> dt_bias = RandomVector(p.v_heads, 0.5f, 1.5f, 13);
    const std::vector<float> decay = RandomVector(p.v_heads, -8, -1, 14);
    const std::vector<float> state = RandomVector(size_t(p.v_heads) * 32 * 32, -0.5f, 0.5f, 15);
    std::vector<double> state_d(state.begin(), state.end());
    const std::vector<double> want = DeltaRuleInDouble(qkv, b, a, dt_bias, decay, state_d, p);

    std::vector<float> out(want.size()), state_out(state.size());
    ASSERT_TRUE(cpu::GatedDeltaRule(qkv.data(), b.data(), a.data(), dt_bias.data(), decay.data(), state.data(),
                                    state_out.data(), out.data(), p, cpu::Exec{})
                    .ok());
    ExpectClose(out, want, p.head_dim, kVsDouble, "outputs");
    ExpectClose(state_out, state_d, p.head_dim, kVsDouble, "state");

    // Two calls (2 + 4 tokens), the state carried in place: the same bits.
    std::vector<float> split(want.size()), carried = state;
    GatedDeltaRuleParams first = p, second = p;
    first.n_tokens = 2;
    second.n_tokens = 4;
    ASSERT_TRUE(cpu::GatedDeltaRule(qkv.data(), b.data(), a.data(), dt_bias.data(), decay.data(), carried.data(),
                                    carried.data(), split.data(), first, cpu::Exec{})
                    .ok());
    ASSERT_TRUE(cpu::GatedDeltaRule(qkv.data() + 2 * p.qkv_stride, b.data() + 2 * p.ba_stride,
                                    a.data() + 2 * p.ba_stride, dt_bias.data(), decay.data(), carried.data(),
                                    carried.data(), split.data() + 2 * p.v_heads * p.head_dim, second, cpu::Exec{})
                    .ok());
    ExpectSameBits(split, out, "2 + 4 tokens");
    ExpectSameBits(carried, state_out, "the carried state");

    // Value heads on a pool of threads: the same bits.
    cpu::ThreadPool pool(3);
    std::vector<float> pooled(want.size()), pooled_state(state.size());
    ASSERT_TRUE(cpu::GatedDeltaRule(qkv.data(), b.data(), a.data(), dt_bias.data(), decay.data(), state.data(),
                                    pooled_state.data(), pooled.data(), p, cpu::Exec{.pool = &pool})
                    .ok());
    ExpectSameBits(pooled, out, "on 3 threads");
    ExpectSameBits(pooled_state, state_out, "the state on 3 threads");
  }
}

TEST(GatedDeltaRuleTest, SplitsACallIntoLeadWholeAlignedChunksAndTail) {
  auto split = [](int n, int chunk, int64_t first) {
    const DeltaRuleSplit s = SplitDeltaRule({.n_tokens = n, .chunk = chunk, .first_position = first});
    return std::vector<int>{s.lead, s.whole};
  };
  EXPECT_EQ(split(75, 0, 0), (std::vector<int>{75, 0})) << "chunk 0: the step form throughout";
  EXPECT_EQ(split(75, 32, 0), (std::vector<int>{0, 64}));
  EXPECT_EQ(split(75, 8, 5), (std::vector<int>{3, 72}));
  EXPECT_EQ(split(7, 8, 3), (std::vector<int>{5, 0})) << "no aligned chunk lies wholly inside: all step form";
  EXPECT_EQ(split(1, 32, 64), (std::vector<int>{0, 0})) << "a decode step at a chunk boundary";
  EXPECT_EQ(split(32, 32, 64), (std::vector<int>{0, 32}));
}

// The chunked form against the formula in double (the step recurrence; the
// two forms are the same function) and against the step form in float, over
// calls with a ragged lead and tail; aligned splits and a pool keep its bits.
TEST(GatedDeltaRuleTest, TheChunkedFormAgreesWithTheStepForm) {
  struct Case {
    int n_tokens, chunk, head_dim;
    int64_t first_position;
    bool grouped;
  };
  for (const Case c : {Case{75, 8, 32, 5, false}, Case{70, 32, 16, 0, true}, Case{41, 32, 64, 30, false}}) {
    SCOPED_TRACE(::testing::Message() << c.n_tokens << " tokens from position " << c.first_position << ", chunks of "
                                      << c.chunk << ", head_dim " << c.head_dim);
    GatedDeltaRuleParams p{.n_tokens = c.n_tokens, .k_heads = 2, .v_heads = 4, .head_dim = c.head_dim,
                           .grouped_heads = c.grouped, .grouped_ba = c.grouped, .eps = 1e-6f};
    p.qkv_stride = int64_t{2 * p.k_heads + p.v_heads} * p.head_dim;
    p.ba_stride = c.grouped ? 2 * p.v_heads : p.v_heads;
    const std::vector<float> qkv = RandomVector(p.n_tokens * p.qkv_stride, -1, 1, 40);
    const std::vector<float> b = RandomVector(p.n_tokens * p.ba_stride, -3, 3, 41);
    const std::vector<float> a = RandomVector(p.n_tokens * p.ba_stride, -6, 1, 42);
    const std::vector<float> dt_bias = RandomVector(p.v_heads, -1.0f, 0.5f, 43);
    const std::vector<float> decay = RandomVector(p.v_heads, -1, -0.05f, 44);
    const std::vector<float> state = RandomVector(size_t(p.v_heads) * p.head_dim * p.head_dim, -0.5f, 0.5f, 45);
    std::vector<double> state_d(state.begin(), state.end());
    const std::vector<double> want = DeltaRuleInDouble(qkv, b, a, dt_bias, decay, state_d, p);
    auto run = [&](const GatedDeltaRuleParams& q, std::vector<float>& out, std::vector<float>& next,
                   const cpu::Exec& exec = {}) {
      out.assign(want.size(), 0.0f);
      next.assign(state.size(), 0.0f);
      return cpu::GatedDeltaRule(qkv.data(), b.data(), a.data(), dt_bias.data(), decay.data(), state.data(),
                                 next.data(), out.data(), q, exec);
    };
    GatedDeltaRuleParams chunked = p;
    chunked.chunk = c.chunk;
    chunked.first_position = c.first_position;
    ASSERT_GT(SplitDeltaRule(chunked).whole, 0) << "the case must exercise the chunked form";
    std::vector<float> step_out, step_state, out, next;
    ASSERT_TRUE(run(p, step_out, step_state).ok());
    ASSERT_TRUE(run(chunked, out, next).ok());
    // Decays down to exp(-2) a token keep ~20 tokens of memory: sums of a
    // few hundred terms, so 1e-5 relative against double as for the step
    // form, and twice that between the two float forms.
    ExpectClose(out, want, p.head_dim, kVsDouble, "chunked outputs vs double");
    ExpectClose(next, state_d, p.head_dim, kVsDouble, "chunked state vs double");
    ExpectClose(out, step_out, p.head_dim, {2e-5, 2e-6}, "chunked vs step outputs");
    ExpectClose(next, step_state, p.head_dim, {2e-5, 2e-6}, "chunked vs step state");

    // Split where an aligned chunk ends: the bits of one call.
    const DeltaRuleSplit whole = SplitDeltaRule(chunked);
    const int cut = whole.lead + c.chunk;
    GatedDeltaRuleParams first = chunked, second = chunked;
    first.n_tokens = cut;
    second.n_tokens = p.n_tokens - cut;
    second.first_position = c.first_position + cut;
    std::vector<float> split(want.size()), carried = state;
    ASSERT_TRUE(cpu::GatedDeltaRule(qkv.data(), b.data(), a.data(), dt_bias.data(), decay.data(), carried.data(),
                                    carried.data(), split.data(), first, cpu::Exec{})
                    .ok());
    const size_t row = size_t(p.v_heads) * p.head_dim;
    ASSERT_TRUE(cpu::GatedDeltaRule(qkv.data() + cut * p.qkv_stride, b.data() + cut * p.ba_stride,
                                    a.data() + cut * p.ba_stride, dt_bias.data(), decay.data(), carried.data(),
                                    carried.data(), split.data() + cut * row, second, cpu::Exec{})
                    .ok());
    ExpectSameBits(split, out, "split at an aligned chunk's end");
    ExpectSameBits(carried, next, "the carried state");

    cpu::ThreadPool pool(3);
    std::vector<float> pooled, pooled_state;
    ASSERT_TRUE(run(chunked, pooled, pooled_state, cpu::Exec{.pool = &pool}).ok());
    ExpectSameBits(pooled, out, "on 3 threads");
    ExpectSameBits(pooled_state, next, "the state on 3 threads");
  }
}

TEST(GatedDeltaRuleTest, RejectsBadArguments) {
  std::vector<float> buf(4096, 0.0f);
  const float* f = buf.data();
  GatedDeltaRuleParams p{.n_tokens = 1, .k_heads = 2, .v_heads = 3, .head_dim = 4, .qkv_stride = 28,
                         .ba_stride = 3, .eps = 1e-6f};
  EXPECT_NE(cpu::GatedDeltaRule(f, f, f, f, f, f, buf.data(), buf.data() + 1024, p, cpu::Exec{}).message().find("multiple"),
            std::string::npos);
  p.v_heads = 4;
  p.qkv_stride = 10;
  EXPECT_NE(cpu::GatedDeltaRule(f, f, f, f, f, f, buf.data(), buf.data() + 1024, p, cpu::Exec{}).message().find("qkv_stride"),
            std::string::npos);
  p.qkv_stride = 32;
  EXPECT_NE(cpu::GatedDeltaRule(f, nullptr, f, f, f, f, buf.data(), buf.data() + 1024, p, cpu::Exec{}).message().find("b is null"),
            std::string::npos);
  p.ba_stride = 4;
  p.chunk = 33;
  EXPECT_NE(cpu::GatedDeltaRule(f, f, f, f, f, f, buf.data(), buf.data() + 1024, p, cpu::Exec{}).message().find("chunk (33)"),
            std::string::npos);
  p.chunk = 8;
  p.first_position = -1;
  EXPECT_NE(cpu::GatedDeltaRule(f, f, f, f, f, f, buf.data(), buf.data() + 1024, p, cpu::Exec{})
                .message()
                .find("first_position (-1)"),
            std::string::npos);
  const DeltaNetConvParams conv{.n_tokens = 2, .channels = 8, .kernel = 17};
  EXPECT_NE(cpu::DeltaNetConv(f, f, f, buf.data(), buf.data() + 1024, conv, cpu::Exec{}).message().find("kernel (17)"),
            std::string::npos);
  EXPECT_NE(cpu::DeltaNetConv(f, f, f, buf.data(), buf.data(), {.n_tokens = 2, .channels = 8, .kernel = 4}, cpu::Exec{})
                .message()
                .find("overlaps"),
            std::string::npos);
}

TEST(GatedOutputTest, SplitsEachHeadsQueryAndGateAndGatesBySigmoid) {
  const int tokens = 3, heads = 2, d = 4;
  std::vector<float> qg(tokens * heads * 2 * d);
  for (size_t i = 0; i < qg.size(); ++i) qg[i] = static_cast<float>(i);
  std::vector<float> q(tokens * heads * d), gate(q.size());
  ASSERT_TRUE(cpu::SplitGatedQuery(qg.data(), q.data(), gate.data(), tokens, heads, d).ok());
  for (int th = 0; th < tokens * heads; ++th) {
    for (int e = 0; e < d; ++e) {
      EXPECT_EQ(q[th * d + e], qg[th * 2 * d + e]);
      EXPECT_EQ(gate[th * d + e], qg[th * 2 * d + d + e]);
    }
  }
  std::vector<float> x = {1, 2, -3, 4};
  const std::vector<float> g = {0, 100, -100, 1};
  ASSERT_TRUE(cpu::SigmoidMul(g.data(), x.data(), 4).ok());
  EXPECT_EQ(x[0], 0.5f);
  EXPECT_EQ(x[1], 2.0f);
  EXPECT_EQ(x[2], -0.0f);
  EXPECT_FLOAT_EQ(x[3], 4.0f / (1.0f + std::exp(-1.0f)));
  EXPECT_NE(cpu::SplitGatedQuery(qg.data(), qg.data() + 4, gate.data(), tokens, heads, d).message().find("overlaps"),
            std::string::npos);
}

}  // namespace
}  // namespace octo
