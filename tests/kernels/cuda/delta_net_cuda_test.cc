// cuda::DeltaNetConv, GatedDeltaRule, SplitGatedQuery and SigmoidMul
// against their CPU twins on the same inputs, the states carried across
// calls on the device as the engine carries them.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/ops.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

using testing::ExpectClose;
using testing::ExpectSameBits;
using testing::RandomVector;

// The kernels keep the CPU's order of every sum and --fmad=false keeps each
// rounding; only expf / log1pf differ (CUDA: within 2 ulp). Through beta,
// the decay and SiLU that is a few 2^-23 relative per token, compounded over
// six tokens of state: 1e-5 relative bounds it with room. The executor calls
// the host's functions, so there the results are the CPU's bits.
constexpr testing::Tolerance kCudaVsCpu = {1e-5, 1e-6};

class DeltaNetCudaTest : public testing::CudaOpTest {};

TEST_F(DeltaNetCudaTest, ConvMatchesCpuAndCarriesItsState) {
  const int tokens = 9, channels = 300, kernel = 4;
  const std::vector<float> x = RandomVector(tokens * channels, -2, 2, 1);
  const std::vector<float> taps = RandomVector(channels * kernel, -1, 1, 2);
  const std::vector<float> state = RandomVector((kernel - 1) * channels, -2, 2, 3);
  std::vector<float> want(x.size()), want_state(state.size());
  ASSERT_TRUE(cpu::DeltaNetConv(x.data(), taps.data(), state.data(), want_state.data(), want.data(),
                                {.n_tokens = tokens, .channels = channels, .kernel = kernel}, cpu::Exec{})
                  .ok());
  auto d_x = Upload(x), d_taps = Upload(taps), d_state = Upload(state);
  auto d_out = Output<float>(x.size());
  // 4 tokens, then 5, the state updated in place on the device.
  ASSERT_TRUE(cuda::DeltaNetConv(d_x.get(), d_taps.get(), d_state.get(), d_state.get(), d_out.get(),
                                 {.n_tokens = 4, .channels = channels, .kernel = kernel}, stream())
                  .ok());
  ASSERT_TRUE(cuda::DeltaNetConv(d_x.get() + 4 * channels, d_taps.get(), d_state.get(), d_state.get(),
                                 d_out.get() + 4 * channels, {.n_tokens = 5, .channels = channels, .kernel = kernel},
                                 stream())
                  .ok());
  ExpectClose(d_out.Download(stream()), want, channels, kCudaVsCpu, "conv outputs");
  ExpectSameBits(d_state.Download(stream()), want_state, "the state: the last inputs, copied");
}

TEST_F(DeltaNetCudaTest, DeltaRuleMatchesCpuForEitherHeadMapping) {
  for (const bool grouped : {false, true}) {
    SCOPED_TRACE(grouped ? "grouped" : "cycled");
    GatedDeltaRuleParams p{.n_tokens = 6, .k_heads = 2, .v_heads = 4, .head_dim = 64, .grouped_heads = grouped,
                           .grouped_ba = grouped, .eps = 1e-6f};
    p.qkv_stride = int64_t{2 * p.k_heads + p.v_heads} * p.head_dim;
    p.ba_stride = grouped ? 2 * p.v_heads : p.v_heads;
    const std::vector<float> qkv = RandomVector(p.n_tokens * p.qkv_stride, -1, 1, 20);
    const std::vector<float> b = RandomVector(p.n_tokens * p.ba_stride, -3, 3, 21);
    const std::vector<float> a = RandomVector(p.n_tokens * p.ba_stride, -3, 3, 22);
    const std::vector<float> dt_bias = RandomVector(p.v_heads, 0.5f, 1.5f, 23);
    const std::vector<float> decay = RandomVector(p.v_heads, -8, -1, 24);
    const std::vector<float> state = RandomVector(size_t(p.v_heads) * p.head_dim * p.head_dim, -0.5f, 0.5f, 25);
    std::vector<float> want(size_t(p.n_tokens) * p.v_heads * p.head_dim), want_state(state.size());
    ASSERT_TRUE(cpu::GatedDeltaRule(qkv.data(), b.data(), a.data(), dt_bias.data(), decay.data(), state.data(),
                                    want_state.data(), want.data(), p, cpu::Exec{})
                    .ok());
    auto d_qkv = Upload(qkv), d_b = Upload(b), d_a = Upload(a), d_dt = Upload(dt_bias), d_decay = Upload(decay);
    auto d_in = Upload(state);
    auto d_next = Output<float>(state.size());
    auto d_out = Output<float>(want.size());
    ASSERT_TRUE(cuda::GatedDeltaRule(d_qkv.get(), d_b.get(), d_a.get(), d_dt.get(), d_decay.get(), d_in.get(),
                                     d_next.get(), d_out.get(), p, stream())
                    .ok());
    ExpectClose(d_out.Download(stream()), want, p.head_dim, kCudaVsCpu, "outputs");
    ExpectClose(d_next.Download(stream()), want_state, p.head_dim, kCudaVsCpu, "next state");
    EXPECT_EQ(d_in.Download(stream()), state) << "the committed state is only read";
  }
}

// The chunked form: a ragged lead, whole chunks and a tail in one call, at
// the largest chunk and a head_dim that fills the shared tables.
TEST_F(DeltaNetCudaTest, ChunkedDeltaRuleMatchesCpu) {
  struct Case {
    int n_tokens, chunk, head_dim;
    int64_t first_position;
    bool grouped;
  };
  for (const Case c : {Case{23, 8, 64, 3, false}, Case{40, 32, 256, 0, true}}) {
    SCOPED_TRACE(::testing::Message() << c.n_tokens << " tokens, chunks of " << c.chunk);
    GatedDeltaRuleParams p{.n_tokens = c.n_tokens, .k_heads = 1, .v_heads = 2, .head_dim = c.head_dim,
                           .grouped_heads = c.grouped, .grouped_ba = c.grouped, .eps = 1e-6f,
                           .chunk = c.chunk, .first_position = c.first_position};
    p.qkv_stride = int64_t{2 * p.k_heads + p.v_heads} * p.head_dim;
    p.ba_stride = c.grouped ? 2 * p.v_heads : p.v_heads;
    ASSERT_GT(SplitDeltaRule(p).whole, 0);
    const std::vector<float> qkv = RandomVector(p.n_tokens * p.qkv_stride, -1, 1, 50);
    const std::vector<float> b = RandomVector(p.n_tokens * p.ba_stride, -3, 3, 51);
    const std::vector<float> a = RandomVector(p.n_tokens * p.ba_stride, -6, 1, 52);
    const std::vector<float> dt_bias = RandomVector(p.v_heads, -1.0f, 0.5f, 53);
    const std::vector<float> decay = RandomVector(p.v_heads, -1, -0.05f, 54);
    const std::vector<float> state = RandomVector(size_t(p.v_heads) * p.head_dim * p.head_dim, -0.5f, 0.5f, 55);
    std::vector<float> want(size_t(p.n_tokens) * p.v_heads * p.head_dim), want_state(state.size());
    ASSERT_TRUE(cpu::GatedDeltaRule(qkv.data(), b.data(), a.data(), dt_bias.data(), decay.data(), state.data(),
                                    want_state.data(), want.data(), p, cpu::Exec{})
                    .ok());
    auto d_qkv = Upload(qkv), d_b = Upload(b), d_a = Upload(a), d_dt = Upload(dt_bias), d_decay = Upload(decay);
    auto d_in = Upload(state);
    auto d_next = Output<float>(state.size());
    auto d_out = Output<float>(want.size());
    ASSERT_TRUE(cuda::GatedDeltaRule(d_qkv.get(), d_b.get(), d_a.get(), d_dt.get(), d_decay.get(), d_in.get(),
                                     d_next.get(), d_out.get(), p, stream())
                    .ok());
    // Over more tokens than the step test: twice its tolerance.
    ExpectClose(d_out.Download(stream()), want, p.head_dim, {2e-5, 2e-6}, "outputs");
    ExpectClose(d_next.Download(stream()), want_state, p.head_dim, {2e-5, 2e-6}, "next state");
    EXPECT_EQ(d_in.Download(stream()), state) << "the committed state is only read";
  }
}

TEST_F(DeltaNetCudaTest, GatedOutputMatchesCpuAndBadArgumentsLaunchNothing) {
  const int tokens = 5, heads = 3, d = 64;
  const std::vector<float> qg = RandomVector(tokens * heads * 2 * d, -4, 4, 30);
  std::vector<float> q(tokens * heads * d), gate(q.size());
  ASSERT_TRUE(cpu::SplitGatedQuery(qg.data(), q.data(), gate.data(), tokens, heads, d).ok());
  std::vector<float> x = RandomVector(q.size(), -2, 2, 31), want = x;
  ASSERT_TRUE(cpu::SigmoidMul(gate.data(), want.data(), static_cast<int64_t>(want.size())).ok());
  auto d_qg = Upload(qg);
  auto d_q = Output<float>(q.size()), d_gate = Output<float>(q.size());
  ASSERT_TRUE(cuda::SplitGatedQuery(d_qg.get(), d_q.get(), d_gate.get(), tokens, heads, d, stream()).ok());
  ExpectSameBits(d_q.Download(stream()), q, "queries");
  ExpectSameBits(d_gate.Download(stream()), gate, "gates");
  auto d_x = Upload(x);
  ASSERT_TRUE(cuda::SigmoidMul(d_gate.get(), d_x.get(), static_cast<int64_t>(x.size()), stream()).ok());
  ExpectClose(d_x.Download(stream()), want, d, kCudaVsCpu, "gated");

  auto untouched = Output<float>(64);
  testing::ExpectInvalidArgument(cuda::SigmoidMul(nullptr, untouched.get(), 64, stream()), "SigmoidMul", "gate is null");
  testing::ExpectInvalidArgument(
      cuda::DeltaNetConv(d_x.get(), d_x.get(), d_x.get(), untouched.get(), untouched.get(),
                         {.n_tokens = 1, .channels = 8, .kernel = 1}, stream()),
      "DeltaNetConv", "kernel (1)");
  GatedDeltaRuleParams p{.n_tokens = 1, .k_heads = 1, .v_heads = 1, .head_dim = 300, .qkv_stride = 900,
                         .ba_stride = 1, .eps = 1e-6f};
  testing::ExpectInvalidArgument(cuda::GatedDeltaRule(d_x.get(), d_x.get(), d_x.get(), d_x.get(), d_x.get(),
                                                      d_x.get(), untouched.get(), untouched.get(), p, stream()),
                                 "GatedDeltaRule", "at most 256");
  for (float f : untouched.Download(stream())) EXPECT_TRUE(std::isnan(f)) << "a rejected call wrote";
}

}  // namespace
}  // namespace octo
