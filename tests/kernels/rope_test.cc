// RoPE: hand-checked rotations in both modes, partial rotary, freq_factors,
// ggml's float angle, and random shapes against a double-precision reference.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

using testing::RandomVector;

RopeParams Params(int n_heads, int head_dim, int rope_dim, bool neox, float freq_base = 10000.f,
                  const float* freq_factors = nullptr) {
  RopeParams p;
  p.n_heads = n_heads;
  p.head_dim = head_dim;
  p.rope_dim = rope_dim;
  p.freq_base = freq_base;
  p.neox = neox;
  p.freq_factors = freq_factors;
  return p;
}

// One head of 4 with rope_dim 4 and base 10000: pair 0 turns by pos, pair 1
// by pos / 100. Normal mode pairs (x0, x1) and (x2, x3); neox pairs (x0, x2)
// and (x1, x3). Unit vectors make the result readable: a rotation by a sends
// (1, 0) to (cos a, sin a) and (0, 1) to (-sin a, cos a).
TEST(RopeCpuTest, RotatesUnitVectorsByKnownAngles) {
  const int32_t pos = 3;
  const double a0 = 3.0, a1 = 0.03;
  const double c0 = std::cos(a0), s0 = std::sin(a0), c1 = std::cos(a1), s1 = std::sin(a1);
  struct Case {
    bool neox;
    std::vector<float> x;
    std::vector<double> want;
  };
  const Case cases[] = {
      {false, {1, 0, 0, 0}, {c0, s0, 0, 0}},  {false, {0, 1, 0, 0}, {-s0, c0, 0, 0}},
      {false, {0, 0, 1, 0}, {0, 0, c1, s1}},  {false, {0, 0, 0, 1}, {0, 0, -s1, c1}},
      {true, {1, 0, 0, 0}, {c0, 0, s0, 0}},   {true, {0, 0, 1, 0}, {-s0, 0, c0, 0}},
      {true, {0, 1, 0, 0}, {0, c1, 0, s1}},   {true, {0, 0, 0, 1}, {0, -s1, 0, c1}},
  };
  for (const Case& c : cases) {
    std::vector<float> x = c.x;
    ASSERT_TRUE(cpu::Rope(x.data(), &pos, 1, Params(1, 4, 4, c.neox)).ok());
    for (int d = 0; d < 4; ++d) {
      // 1e-6: cosf/sinf and one rounding of the angle (pos * 0.01f).
      EXPECT_NEAR(x[d], c.want[d], 1e-6)
          << (c.neox ? "neox" : "normal") << " x=(" << c.x[0] << "," << c.x[1] << "," << c.x[2]
          << "," << c.x[3] << ") index " << d;
    }
  }
}

TEST(RopeCpuTest, PositionZeroIsTheIdentity) {
  std::vector<float> x = RandomVector(3 * 64, -2, 2, 4);
  const std::vector<float> before = x;
  const int32_t pos = 0;
  ASSERT_TRUE(cpu::Rope(x.data(), &pos, 1, Params(3, 64, 64, false)).ok());
  EXPECT_EQ(x, before);
}

// Dimensions rope_dim..head_dim-1 of every head come back bit for bit; the
// rotated part matches the same op run on a head of rope_dim alone.
TEST(RopeCpuTest, PartialRotaryLeavesTheTailAlone) {
  const int n_heads = 3, head_dim = 10, rope_dim = 4;
  const int32_t positions[2] = {5, 1234};
  for (bool neox : {false, true}) {
    std::vector<float> x = RandomVector(2 * n_heads * head_dim, -1, 1, 8);
    const std::vector<float> before = x;
    ASSERT_TRUE(cpu::Rope(x.data(), positions, 2, Params(n_heads, head_dim, rope_dim, neox)).ok());
    for (int t = 0; t < 2; ++t) {
      for (int h = 0; h < n_heads; ++h) {
        const size_t base = (static_cast<size_t>(t) * n_heads + h) * head_dim;
        for (int d = rope_dim; d < head_dim; ++d) {
          EXPECT_EQ(x[base + d], before[base + d]) << "token " << t << " head " << h << " d " << d;
        }
        std::vector<float> alone(before.begin() + base, before.begin() + base + rope_dim);
        ASSERT_TRUE(cpu::Rope(alone.data(), &positions[t], 1, Params(1, rope_dim, rope_dim, neox))
                        .ok());
        for (int d = 0; d < rope_dim; ++d) EXPECT_EQ(x[base + d], alone[d]);
      }
    }
  }
}

// freq_factors[i] divides pair i's angle: factor 2 on pair 1 at pos 6 gives
// the angle pair 1 has at pos 3 without factors (6 * 0.01 / 2 == 3 * 0.01).
TEST(RopeCpuTest, FreqFactorsDivideTheAngle) {
  const float factors[2] = {1.0f, 2.0f};
  const int32_t pos6 = 6, pos3 = 3;
  std::vector<float> scaled = {0, 0, 1, 0};
  std::vector<float> plain = scaled;
  ASSERT_TRUE(cpu::Rope(scaled.data(), &pos6, 1, Params(1, 4, 4, false, 10000.f, factors)).ok());
  ASSERT_TRUE(cpu::Rope(plain.data(), &pos3, 1, Params(1, 4, 4, false)).ok());
  EXPECT_NEAR(scaled[2], plain[2], 1e-7);
  EXPECT_NEAR(scaled[3], plain[3], 1e-7);
  EXPECT_NEAR(scaled[3], std::sin(0.03), 1e-6);
}

// ggml's angle for pair i is pos * theta_scale^i multiplied up in float, one
// rounding per pair, with theta_scale = powf(base, -2/rope_dim). At a large
// position that differs from the angle rounded once from its exact value;
// the pair below is one where the two give different rotations.
TEST(RopeCpuTest, AngleIsMultipliedUpInFloatAsGgmlDoes) {
  const int rope_dim = 128, pair = 37;
  const float base = 500000.f;
  const int32_t pos = 131071;
  const float theta_scale = std::pow(base, -2.0f / rope_dim);
  float chained = static_cast<float>(pos);
  for (int i = 0; i < pair; ++i) chained *= theta_scale;
  const float exact = static_cast<float>(pos * std::pow(500000.0, -2.0 * pair / rope_dim));
  ASSERT_NE(std::cos(chained), std::cos(exact)) << "the example no longer tells them apart";

  std::vector<float> x(rope_dim, 0.0f);
  x[2 * pair] = 1.0f;  // normal mode: pair 37 is (x[74], x[75])
  ASSERT_TRUE(cpu::Rope(x.data(), &pos, 1, Params(1, rope_dim, rope_dim, false, base)).ok());
  EXPECT_EQ(x[2 * pair], std::cos(chained));
  EXPECT_EQ(x[2 * pair + 1], std::sin(chained));
}

// The formula of ops.h in double: theta_i = pos * base^(-2i/rope_dim) / ff_i.
std::vector<double> ReferenceRope(const std::vector<float>& x, const std::vector<int32_t>& pos,
                                  const RopeParams& p) {
  std::vector<double> out(x.begin(), x.end());
  const int n_pairs = p.rope_dim / 2;
  for (size_t t = 0; t < pos.size(); ++t) {
    for (int h = 0; h < p.n_heads; ++h) {
      double* head = out.data() + (t * p.n_heads + h) * p.head_dim;
      for (int i = 0; i < n_pairs; ++i) {
        double theta = pos[t] * std::pow(static_cast<double>(p.freq_base),
                                         -2.0 * i / p.rope_dim);
        if (p.freq_factors != nullptr) theta /= p.freq_factors[i];
        double* a = p.neox ? head + i : head + 2 * i;
        double* b = p.neox ? a + n_pairs : a + 1;
        const double x0 = *a, x1 = *b;
        *a = x0 * std::cos(theta) - x1 * std::sin(theta);
        *b = x0 * std::sin(theta) + x1 * std::cos(theta);
      }
    }
  }
  return out;
}

// Tolerance for pair i, per element: |pair| * (theta_i * (i + 2) * 2^-22 +
// 2^-20). The op's angle is off from the exact one by a relative
// (i + 1) * 2^-23 at most: theta_scale is rounded once (powf), and each of
// the i multiplications and the freq_factors division rounds once more; at
// position p that error is absolute, theta_i * (i + 1) * 2^-23, and rotates
// the pair by as much. cosf/sinf and the two products and the sum of the
// rotation add a few 2^-24 relative to |pair|. The bound takes twice each
// term; measured (13600 pairs, positions to 40000) at most 0.32 of it.
double PairTolerance(double theta, int i, double pair_norm) {
  return pair_norm * (std::abs(theta) * (i + 2) * 0x1p-22 + 0x1p-20);
}

TEST(RopeCpuTest, MatchesDoublePrecisionReference) {
  struct Shape {
    int n_tokens, n_heads, head_dim, rope_dim;
    float freq_base;
  };
  const Shape shapes[] = {{1, 1, 2, 2, 10000.f},     {3, 4, 64, 64, 10000.f},
                          {2, 8, 128, 128, 500000.f}, {5, 2, 80, 32, 10000.f},
                          {4, 3, 128, 64, 1000000.f}, {2, 5, 6, 6, 10.f}};
  uint32_t seed = 1;
  for (const Shape& s : shapes) {
    for (bool neox : {false, true}) {
      for (bool with_factors : {false, true}) {
        std::vector<float> factors(s.rope_dim / 2);
        for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 0.5f * (i % 5);
        const RopeParams p = Params(s.n_heads, s.head_dim, s.rope_dim, neox, s.freq_base,
                                    with_factors ? factors.data() : nullptr);
        std::vector<int32_t> positions(s.n_tokens);
        std::mt19937 rng(seed);
        for (int32_t& pos : positions) pos = static_cast<int32_t>(rng() % 40000);
        std::vector<float> x =
            RandomVector(static_cast<size_t>(s.n_tokens) * s.n_heads * s.head_dim, -2, 2, seed++);
        const std::vector<double> want = ReferenceRope(x, positions, p);
        const std::vector<float> before = x;
        ASSERT_TRUE(cpu::Rope(x.data(), positions.data(), s.n_tokens, p).ok());

        const std::string what =
            absl::StrFormat("n_tokens=%d n_heads=%d head_dim=%d rope_dim=%d neox=%d factors=%d",
                            s.n_tokens, s.n_heads, s.head_dim, s.rope_dim, neox, with_factors);
        const int n_pairs = s.rope_dim / 2;
        for (int t = 0; t < s.n_tokens; ++t) {
          for (int h = 0; h < s.n_heads; ++h) {
            const size_t base = (static_cast<size_t>(t) * s.n_heads + h) * s.head_dim;
            for (int i = 0; i < n_pairs; ++i) {
              const size_t a = base + (neox ? i : 2 * i);
              const size_t b = a + (neox ? n_pairs : 1);
              double theta = positions[t] * std::pow(static_cast<double>(s.freq_base),
                                                     -2.0 * i / s.rope_dim);
              if (with_factors) theta /= factors[i];
              const double tol = PairTolerance(theta, i, std::hypot(before[a], before[b]));
              ASSERT_LE(std::abs(x[a] - want[a]), tol) << what << " t " << t << " pair " << i;
              ASSERT_LE(std::abs(x[b] - want[b]), tol) << what << " t " << t << " pair " << i;
            }
            for (int d = s.rope_dim; d < s.head_dim; ++d) ASSERT_EQ(x[base + d], before[base + d]);
          }
        }
      }
    }
  }
}

TEST(RopeCpuTest, RejectsBadArguments) {
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const int32_t pos[2] = {1, 2};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    float* x;
    const int32_t* positions;
    int n_tokens;
    RopeParams p;
    const char* names;  // what the message must name
  };
  const Case cases[] = {
      {nullptr, pos, 2, Params(1, 4, 4, false), "x is null"},
      {x, nullptr, 2, Params(1, 4, 4, false), "positions is null"},
      {x, pos, 0, Params(1, 4, 4, false), "n_tokens (0)"},
      {x, pos, 2, Params(0, 4, 4, false), "n_heads (0)"},
      {x, pos, 2, Params(1, 0, 0, false), "head_dim (0)"},
      {x, pos, 2, Params(1, 4, 3, false), "rope_dim (3)"},
      {x, pos, 2, Params(1, 4, 0, false), "rope_dim (0)"},
      {x, pos, 2, Params(1, 4, 6, false), "rope_dim (6)"},
      {x, pos, 2, Params(1, 4, -2, false), "rope_dim (-2)"},
      {x, pos, 2, Params(1, 4, 4, false, 0.0f), "freq_base (0)"},
      {x, pos, 2, Params(1, 4, 4, false, -10.0f), "freq_base (-10)"},
      {x, pos, 2, Params(1, 4, 4, false, nan), "freq_base (nan)"},
      {x, pos, 2, Params(1, 4, 4, false, inf), "freq_base (inf)"},
  };
  for (const Case& c : cases) {
    const absl::Status status = cpu::Rope(c.x, c.positions, c.n_tokens, c.p);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.names << ": " << status;
    EXPECT_NE(status.message().find("Rope"), std::string::npos) << status;
    EXPECT_NE(status.message().find(c.names), std::string::npos) << status;
  }
  for (int i = 0; i < 8; ++i) EXPECT_EQ(x[i], i + 1.0f) << "a rejected call wrote to x";
}

}  // namespace
}  // namespace octo
