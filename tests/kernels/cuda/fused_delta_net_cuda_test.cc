// cuda::DeltaNetConvRule (fused.h): a decode step's DeltaNet conv and gated
// delta rule in one launch leave what DeltaNetConv then GatedDeltaRule
// leave -- the conv's outputs and state, the rule's outputs and state, bit
// for bit -- in one launch fewer: key heads shared by several value heads
// (grouped, qwen3-next; cycled, qwen3.5), a head per key head, the rule's
// state updated in place and into another buffer; and what it cannot do in
// one launch is refused with nothing launched.
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
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

using testing::RandomVector;

struct Shape {
  int k_heads, v_heads, head_dim, kernel;
  bool grouped;
  bool in_place;  // the rule's state updated where it is read
};

class FusedDeltaNetCudaTest : public testing::CudaOpTest {
 protected:
  struct Result {
    std::vector<float> conv_out, conv_state, rule_out, rule_state;
    uint64_t launches = 0;
  };

  static GatedDeltaRuleParams Rule(const Shape& s) {
    GatedDeltaRuleParams p{.n_tokens = 1, .k_heads = s.k_heads, .v_heads = s.v_heads, .head_dim = s.head_dim,
                           .grouped_heads = s.grouped, .grouped_ba = s.grouped, .eps = 1e-6f};
    p.qkv_stride = int64_t{2 * s.k_heads + s.v_heads} * s.head_dim;
    p.ba_stride = s.grouped ? 2 * s.v_heads : s.v_heads;
    return p;
  }

  Result Run(const Shape& s, bool fused) {
    const GatedDeltaRuleParams p = Rule(s);
    const int channels = static_cast<int>(p.qkv_stride);
    const DeltaNetConvParams cp{.n_tokens = 1, .channels = channels, .kernel = s.kernel};
    const size_t state = size_t(s.v_heads) * s.head_dim * s.head_dim;
    auto d_x = Upload(RandomVector(channels, -2, 2, 1));
    auto d_taps = Upload(RandomVector(size_t(channels) * s.kernel, -1, 1, 2));
    auto d_conv_in = Upload(RandomVector(size_t(s.kernel - 1) * channels, -2, 2, 3));
    auto d_conv_state = Output<float>(size_t(s.kernel - 1) * channels);
    auto d_conv_out = Output<float>(channels);
    auto d_b = Upload(RandomVector(p.ba_stride, -3, 3, 4));
    auto d_a = Upload(RandomVector(p.ba_stride, -3, 3, 5));
    auto d_dt = Upload(RandomVector(s.v_heads, 0.5f, 1.5f, 6));
    auto d_decay = Upload(RandomVector(s.v_heads, -8, -1, 7));
    auto d_state_in = Upload(RandomVector(state, -0.5f, 0.5f, 8));
    auto d_state_next = Output<float>(state);
    float* state_out = s.in_place ? d_state_in.get() : d_state_next.get();
    auto d_out = Output<float>(size_t(s.v_heads) * s.head_dim);
    const cuda::DeltaNetConvCall conv{d_x.get(), d_taps.get(), d_conv_in.get(), d_conv_state.get(), d_conv_out.get(),
                                      cp};
    const cuda::ApiCounts before = cuda::CurrentApiCounts();
    if (fused) {
      const absl::Status st = cuda::DeltaNetConvRule(conv, d_b.get(), d_a.get(), d_dt.get(), d_decay.get(),
                                                     d_state_in.get(), state_out, d_out.get(), p, stream());
      EXPECT_TRUE(st.ok()) << st;
    } else {
      absl::Status st = cuda::DeltaNetConv(conv.x, conv.taps, conv.state_in, conv.state_out, conv.out, cp, stream());
      EXPECT_TRUE(st.ok()) << st;
      st = cuda::GatedDeltaRule(d_conv_out.get(), d_b.get(), d_a.get(), d_dt.get(), d_decay.get(), d_state_in.get(),
                                state_out, d_out.get(), p, stream());
      EXPECT_TRUE(st.ok()) << st;
    }
    Result r;
    r.launches = (cuda::CurrentApiCounts() - before).launches;
    r.conv_out = d_conv_out.Download(stream());
    r.conv_state = d_conv_state.Download(stream());
    r.rule_out = d_out.Download(stream());
    r.rule_state = s.in_place ? d_state_in.Download(stream()) : d_state_next.Download(stream());
    return r;
  }
};

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_F(FusedDeltaNetCudaTest, TheConvInTheRulesLaunchGivesTheTwoLaunchesBits) {
  const Shape shapes[] = {
      {2, 4, 64, 4, true, false},    // qwen3-next's grouping, two value heads a key head
      {2, 4, 64, 4, false, false},   // qwen3.5's cycling
      {2, 4, 64, 4, true, true},     // the state updated in place
      {3, 3, 32, 2, false, false},   // a value head a key head, a 2-tap conv
      {1, 8, 128, 4, true, false},   // eight value heads on one key head
  };
  for (const Shape& s : shapes) {
    SCOPED_TRACE(absl::StrFormat("k_heads %d v_heads %d head_dim %d kernel %d %s%s", s.k_heads, s.v_heads, s.head_dim,
                                 s.kernel, s.grouped ? "grouped" : "cycled", s.in_place ? " in place" : ""));
    const Result apart = Run(s, false);
    const Result fused = Run(s, true);
    EXPECT_EQ(fused.launches + 1, apart.launches) << "the conv's launch goes";
    EXPECT_TRUE(SameBits(fused.conv_out, apart.conv_out)) << "conv outputs";
    EXPECT_TRUE(SameBits(fused.conv_state, apart.conv_state)) << "conv state: every channel written once";
    EXPECT_TRUE(SameBits(fused.rule_out, apart.rule_out)) << "rule outputs";
    EXPECT_TRUE(SameBits(fused.rule_state, apart.rule_state)) << "rule state";
  }
}

TEST_F(FusedDeltaNetCudaTest, RefusesWhatOneLaunchCannotDoAndLaunchesNothing) {
  const Shape s{2, 4, 32, 4, true, false};
  GatedDeltaRuleParams p = Rule(s);
  const int channels = static_cast<int>(p.qkv_stride);
  auto d_x = Output<float>(2 * channels);
  auto d_taps = Output<float>(size_t(channels) * s.kernel);
  auto d_conv_state = Output<float>(2 * size_t(s.kernel - 1) * channels);
  auto d_conv_out = Output<float>(2 * channels);
  auto d_ba = Output<float>(2 * p.ba_stride);
  auto d_heads = Output<float>(s.v_heads);
  auto d_state = Output<float>(size_t(s.v_heads) * s.head_dim * s.head_dim);
  auto d_out = Output<float>(2 * size_t(s.v_heads) * s.head_dim);
  const size_t history = size_t(s.kernel - 1) * channels;
  cuda::DeltaNetConvCall conv{d_x.get(), d_taps.get(), d_conv_state.get(), d_conv_state.get() + history,
                              d_conv_out.get(), DeltaNetConvParams{.n_tokens = 1, .channels = channels,
                                                                   .kernel = s.kernel}};
  auto run = [&](const cuda::DeltaNetConvCall& c, const GatedDeltaRuleParams& rule) {
    return cuda::DeltaNetConvRule(c, d_ba.get(), d_ba.get(), d_heads.get(), d_heads.get(), d_state.get(),
                                  d_state.get(), d_out.get(), rule, stream());
  };
  const cuda::ApiCounts before = cuda::CurrentApiCounts();
  cuda::DeltaNetConvCall two_tokens = conv;
  two_tokens.p.n_tokens = 2;
  testing::ExpectInvalidArgument(run(two_tokens, p), "DeltaNetConvRule", "(one, a decode step's)");
  GatedDeltaRuleParams wider = p;
  wider.qkv_stride += 32;
  testing::ExpectInvalidArgument(run(conv, wider), "DeltaNetConvRule", "conv channels are not the rule's");
  cuda::DeltaNetConvCall in_place = conv;
  in_place.state_out = d_conv_state.get();
  testing::ExpectInvalidArgument(run(in_place, p), "DeltaNetConvRule", "state_in overlaps its state_out");
  cuda::DeltaNetConvCall onto_x = conv;
  onto_x.x = d_out.get();
  testing::ExpectInvalidArgument(run(onto_x, p), "DeltaNetConvRule", "overlaps what the launch writes");
  cuda::DeltaNetConvCall onto_rule_state = conv;
  onto_rule_state.state_out = d_state.get();
  testing::ExpectInvalidArgument(run(onto_rule_state, p), "DeltaNetConvRule", "overlaps the rule's state or out");
  EXPECT_EQ((cuda::CurrentApiCounts() - before).launches, 0u) << "nothing launched";
}

}  // namespace
}  // namespace octo
