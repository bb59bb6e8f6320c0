// cpu::MoeCombine against a scalar recomputation of kernels/ops.h's formula,
// in float and in the documented order, so the same bits (tolerance 0).
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

using testing::ExpectSameBits;
using testing::RandomVector;

// One MoeCombine call's inputs, shaped as kernels/ops.h says.
struct Inputs {
  int n_rows = 0, k = 0, dim = 0;
  std::vector<float> expert_out;          // (n_rows, k, dim)
  std::vector<float> weights;             // (n_rows, k)
  std::vector<float> shared;              // (n_rows, dim), or empty: no shared expert
  std::vector<float> shared_gate_logits;  // (n_rows), or empty: gate 1
};

Inputs MakeInputs(int n_rows, int k, int dim, bool with_shared, bool with_logits, uint32_t seed) {
  Inputs in;
  in.n_rows = n_rows;
  in.k = k;
  in.dim = dim;
  in.expert_out = RandomVector(static_cast<size_t>(n_rows) * k * dim, -4, 4, seed);
  in.weights = RandomVector(static_cast<size_t>(n_rows) * k, 0, 1, seed + 1);
  if (with_shared) in.shared = RandomVector(static_cast<size_t>(n_rows) * dim, -4, 4, seed + 2);
  if (with_logits) in.shared_gate_logits = RandomVector(n_rows, -8, 8, seed + 3);
  return in;
}

MoeCombineParams Params(const Inputs& in, float* out) {
  MoeCombineParams p;
  p.expert_out = in.expert_out.data();
  p.weights = in.weights.data();
  p.shared = in.shared.empty() ? nullptr : in.shared.data();
  p.shared_gate_logits = in.shared_gate_logits.empty() ? nullptr : in.shared_gate_logits.data();
  p.out = out;
  p.n_rows = in.n_rows;
  p.k = in.k;
  p.dim = in.dim;
  return p;
}

// kernels/ops.h's formula, one element at a time, in float and in its order:
// acc = 0; acc = acc + y * w for j = 0..k-1; then acc + shared * gate.
std::vector<float> Reference(const Inputs& in) {
  std::vector<float> out(static_cast<size_t>(in.n_rows) * in.dim);
  for (int r = 0; r < in.n_rows; ++r) {
    float gate = 1.0f;
    if (!in.shared_gate_logits.empty()) gate = 1.0f / (1.0f + std::exp(-in.shared_gate_logits[r]));
    for (int i = 0; i < in.dim; ++i) {
      float acc = 0.0f;
      for (int j = 0; j < in.k; ++j) {
        const float y = in.expert_out[(static_cast<size_t>(r) * in.k + j) * in.dim + i];
        const float w = in.weights[static_cast<size_t>(r) * in.k + j];
        acc = acc + y * w;
      }
      if (!in.shared.empty()) acc = acc + in.shared[static_cast<size_t>(r) * in.dim + i] * gate;
      out[static_cast<size_t>(r) * in.dim + i] = acc;
    }
  }
  return out;
}

// Each shape with no shared expert, a shared expert at gate 1 (no logits),
// and a shared expert gated by sigmoid of its logit. k: 1 (a dense-like
// route), 2, 8 (qwen2moe's top-8); dim: 1, odd, a block's worth, a width.
TEST(MoeCombineCpuTest, MatchesScalarRecomputationBitForBit) {
  struct Variant {
    bool shared, logits;
    const char* name;
  };
  uint32_t seed = 1;
  for (int n_rows : {1, 3, 17}) {
    for (int k : {1, 2, 8}) {
      for (int dim : {1, 7, 256, 1000}) {
        for (const Variant& v : {Variant{false, false, "no shared"}, Variant{true, false, "shared, gate 1"},
                                 Variant{true, true, "shared, gated"}}) {
          const Inputs in = MakeInputs(n_rows, k, dim, v.shared, v.logits, seed);
          seed += 4;
          std::vector<float> out(static_cast<size_t>(n_rows) * dim, -7.0f);
          ASSERT_TRUE(cpu::MoeCombine(Params(in, out.data())).ok());
          ExpectSameBits(out, Reference(in), absl::StrFormat("n_rows=%d k=%d dim=%d %s", n_rows, k, dim, v.name));
        }
      }
    }
  }
}

// The order is the documented one: ((0 + 1) + 1e8) - 1e8 is 0 in float (1 +
// 1e8 rounds to 1e8), where summing the other way round would give 1. Then
// the shared expert: logit 0 gives gate 1/2 exactly, so 3 * 0.5 adds 1.5.
TEST(MoeCombineCpuTest, SumsExpertsInOrderThenAddsSharedTimesGate) {
  const std::vector<float> expert_out = {1.0f, 1e8f, -1e8f};  // (1, 3, 1)
  const std::vector<float> weights = {1.0f, 1.0f, 1.0f};      // (1, 3)
  const std::vector<float> shared = {3.0f};                   // (1, 1)
  const std::vector<float> logits = {0.0f};                   // (1)
  float out = -7.0f;
  MoeCombineParams p;
  p.expert_out = expert_out.data();
  p.weights = weights.data();
  p.out = &out;
  p.n_rows = 1;
  p.k = 3;
  p.dim = 1;
  ASSERT_TRUE(cpu::MoeCombine(p).ok());
  EXPECT_EQ(out, 0.0f);
  p.shared = shared.data();
  ASSERT_TRUE(cpu::MoeCombine(p).ok());
  EXPECT_EQ(out, 3.0f);  // gate 1 without logits
  p.shared_gate_logits = logits.data();
  ASSERT_TRUE(cpu::MoeCombine(p).ok());
  EXPECT_EQ(out, 1.5f);
}

// The sum starts from +0: experts that all give -0 sum to +0, as 0 + -0 is.
TEST(MoeCombineCpuTest, SumStartsFromPositiveZero) {
  const std::vector<float> expert_out = {-0.0f, -0.0f};  // (1, 2, 1)
  const std::vector<float> weights = {1.0f, 1.0f};       // (1, 2)
  float out = -7.0f;
  MoeCombineParams p;
  p.expert_out = expert_out.data();
  p.weights = weights.data();
  p.out = &out;
  p.n_rows = 1;
  p.k = 2;
  p.dim = 1;
  ASSERT_TRUE(cpu::MoeCombine(p).ok());
  EXPECT_EQ(std::bit_cast<uint32_t>(out), 0u) << out;
}

// The gate's tails: expf(100) overflows, so sigmoid(-100) is exactly 0 (not
// NaN); sigmoid(100) rounds to 1.
TEST(MoeCombineCpuTest, GateSaturatesAtLargeLogits) {
  const std::vector<float> expert_out = {0.25f, 0.25f};  // (2, 1, 1)
  const std::vector<float> weights = {1.0f, 1.0f};       // (2, 1)
  const std::vector<float> shared = {2.0f, 2.0f};        // (2, 1)
  const std::vector<float> logits = {-100.0f, 100.0f};   // (2)
  std::vector<float> out(2, -7.0f);
  MoeCombineParams p;
  p.expert_out = expert_out.data();
  p.weights = weights.data();
  p.shared = shared.data();
  p.shared_gate_logits = logits.data();
  p.out = out.data();
  p.n_rows = 2;
  p.k = 1;
  p.dim = 1;
  ASSERT_TRUE(cpu::MoeCombine(p).ok());
  EXPECT_EQ(out[0], 0.25f);
  EXPECT_EQ(out[1], 2.25f);
}

// Logits without a shared expert are ignored: the result is the experts' sum.
TEST(MoeCombineCpuTest, LogitsWithoutSharedAreIgnored) {
  const Inputs without = MakeInputs(3, 8, 257, /*with_shared=*/false, /*with_logits=*/false, 500);
  Inputs with_logits = without;
  with_logits.shared_gate_logits = RandomVector(3, -8, 8, 600);
  std::vector<float> want(3 * 257), got(3 * 257);
  ASSERT_TRUE(cpu::MoeCombine(Params(without, want.data())).ok());
  ASSERT_TRUE(cpu::MoeCombine(Params(with_logits, got.data())).ok());
  ExpectSameBits(got, want, "logits, no shared");
}

TEST(MoeCombineCpuTest, RejectsBadArguments) {
  const float expert_out[4] = {1, 2, 3, 4};  // (1, 2, 2)
  const float weights[2] = {0.5f, 0.5f};     // (1, 2)
  float out[2] = {-7, -7};                   // (1, 2)
  struct Case {
    const float* expert_out;
    const float* weights;
    float* out;
    int n_rows, k, dim;
    const char* needle;  // what the message must name
  };
  const Case cases[] = {
      {nullptr, weights, out, 1, 2, 2, "expert_out is null"},
      {expert_out, nullptr, out, 1, 2, 2, "weights is null"},
      {expert_out, weights, nullptr, 1, 2, 2, "out is null"},
      {expert_out, weights, out, 0, 2, 2, "n_rows (0)"},
      {expert_out, weights, out, -1, 2, 2, "n_rows (-1)"},
      {expert_out, weights, out, 1, 0, 2, "k (0)"},
      {expert_out, weights, out, 1, -3, 2, "k (-3)"},
      {expert_out, weights, out, 1, 2, 0, "dim (0)"},
      {expert_out, weights, out, 1, 2, -2, "dim (-2)"},
  };
  for (const Case& c : cases) {
    MoeCombineParams p;
    p.expert_out = c.expert_out;
    p.weights = c.weights;
    p.out = c.out;
    p.n_rows = c.n_rows;
    p.k = c.k;
    p.dim = c.dim;
    const absl::Status status = cpu::MoeCombine(p);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.needle << ": " << status;
    EXPECT_NE(status.message().find("MoeCombine"), std::string::npos) << status;
    EXPECT_NE(status.message().find(c.needle), std::string::npos) << "wanted \"" << c.needle << "\" in: " << status;
  }
  EXPECT_EQ(out[0], -7.0f);
  EXPECT_EQ(out[1], -7.0f);
}

}  // namespace
}  // namespace octo
