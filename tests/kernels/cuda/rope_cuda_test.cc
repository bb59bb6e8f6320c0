// cuda::Rope against cpu::Rope on the same inputs: both modes, partial
// rotary, freq_factors, any position.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "kernels/cuda/api_counts.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

using testing::ExpectClose;
using testing::RandomVector;
using testing::Tolerance;

// Both sides compute the same angle bits (theta_scale on the host, the
// multiplications and the division in float, unfused), so only cosf and
// sinf differ: the GPU's are within 2 ulp (CUDA's documented bound, full
// range), 2 * 2^-23 = 2^-22 relative. Then out = x0 * c - x1 * s is off by
// at most 2^-22 * (|x0| + |x1|) <= 2^-20 for x in [-2, 2], plus the two
// products and the sum rounding the other way (one ulp each, <= 2^-22 for
// magnitudes < 4): 2^-20 + 3 * 2^-22 = 1.7e-6 absolute. 2e-6 bounds it.
// The executor calls the host's cosf/sinf, the CPU's own, so there the two
// are bit for bit equal (measured worst: 0).
constexpr Tolerance kCudaVsCpu = {0.0, 2e-6};

RopeParams Params(int n_heads, int head_dim, int rope_dim, bool neox, float freq_base,
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

// Positions: 0, small, large (llama-3.1's 131071 context), negative (any
// int32 is allowed), at random.
std::vector<int32_t> Positions(int n_tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pos(-1000, 140000);
  std::vector<int32_t> positions(n_tokens);
  const int32_t corners[] = {0, 1, 131071, -5, 7};
  for (int t = 0; t < n_tokens; ++t) positions[t] = t < 5 ? corners[t] : pos(rng);
  return positions;
}

class RopeCudaTest : public testing::CudaOpTest {
 protected:
  // cuda::Rope of x in place; factors (rope_dim / 2) or empty for none.
  std::vector<float> Run(const std::vector<float>& x, const std::vector<int32_t>& positions, RopeParams p,
                         const std::vector<float>& factors) {
    auto d_x = Upload(x);
    auto d_positions = Upload(positions);
    auto d_factors = Upload(factors.empty() ? std::vector<float>{0.0f} : factors);
    p.freq_factors = factors.empty() ? nullptr : d_factors.get();
    const absl::Status launched =
        cuda::Rope(d_x.get(), d_positions.get(), static_cast<int>(positions.size()), p, stream());
    EXPECT_TRUE(launched.ok()) << launched;
    return d_x.Download(stream());
  }
  std::vector<float> Want(std::vector<float> x, const std::vector<int32_t>& positions, RopeParams p,
                          const std::vector<float>& factors) {
    p.freq_factors = factors.empty() ? nullptr : factors.data();
    EXPECT_TRUE(cpu::Rope(x.data(), positions.data(), static_cast<int>(positions.size()), p).ok());
    return x;
  }
};

// llama (normal, 32 heads of 128, base 10000 and 500000 with freq_factors),
// qwen2/3 (neox, base 1e6, 28 and 4 heads), partial rotary (rope_dim 4 of
// 10, 64 of 96, both modes), a head of one pair, 7 heads (not a multiple of
// anything); 1, 5 and 9 tokens.
TEST_F(RopeCudaTest, MatchesCpu) {
  struct Shape {
    int n_tokens, n_heads, head_dim, rope_dim;
    bool neox;
    float freq_base;
    bool factors;
  };
  uint32_t seed = 1;
  for (const Shape& s : {Shape{1, 1, 2, 2, false, 10000.f, false}, Shape{9, 32, 128, 128, false, 10000.f, false},
                         Shape{9, 32, 128, 128, false, 500000.f, true}, Shape{9, 28, 128, 128, true, 1e6f, false},
                         Shape{1, 4, 128, 128, true, 1e6f, false}, Shape{5, 3, 10, 4, false, 10000.f, false},
                         Shape{5, 3, 10, 4, true, 10000.f, true}, Shape{9, 7, 96, 64, true, 10000.f, false},
                         Shape{9, 7, 96, 64, false, 10000.f, true}}) {
    const std::string what =
        absl::StrFormat("n_tokens=%d n_heads=%d head_dim=%d rope_dim=%d neox=%d base=%g factors=%d", s.n_tokens,
                        s.n_heads, s.head_dim, s.rope_dim, s.neox, s.freq_base, s.factors);
    const std::vector<float> x =
        RandomVector(static_cast<size_t>(s.n_tokens) * s.n_heads * s.head_dim, -2.0f, 2.0f, seed++);
    const std::vector<int32_t> positions = Positions(s.n_tokens, seed++);
    // llama-3.1's factors run from 1 (high frequencies) to 8 (low).
    const std::vector<float> factors = s.factors ? RandomVector(s.rope_dim / 2, 1.0f, 8.0f, seed++) : std::vector<float>{};
    const RopeParams p = Params(s.n_heads, s.head_dim, s.rope_dim, s.neox, s.freq_base);

    const std::vector<float> got = Run(x, positions, p, factors);
    ExpectClose(got, Want(x, positions, p, factors), s.head_dim, kCudaVsCpu, what);
    // Dimensions rope_dim.. of every head come back as they were.
    for (size_t head = 0; head < static_cast<size_t>(s.n_tokens) * s.n_heads; ++head) {
      for (int d = s.rope_dim; d < s.head_dim; ++d) {
        const size_t i = head * s.head_dim + d;
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(x[i])) << what << " head " << head << " d " << d;
      }
    }
  }
}

// A token's rotation does not depend on the other tokens of the call: the
// same bits alone as in a batch of 9.
TEST_F(RopeCudaTest, TokensAreIndependent) {
  const int n_tokens = 9, n_heads = 8, head_dim = 64;
  const RopeParams p = Params(n_heads, head_dim, head_dim, true, 1e6f);
  const std::vector<float> x = RandomVector(static_cast<size_t>(n_tokens) * n_heads * head_dim, -2.0f, 2.0f, 3);
  const std::vector<int32_t> positions = Positions(n_tokens, 4);
  const std::vector<float> batch = Run(x, positions, p, {});
  const size_t width = static_cast<size_t>(n_heads) * head_dim;
  for (int t = 0; t < n_tokens; t += 4) {
    const std::vector<float> row(x.begin() + t * width, x.begin() + (t + 1) * width);
    const std::vector<float> alone = Run(row, {positions[t]}, p, {});
    for (size_t i = 0; i < width; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(alone[i]), std::bit_cast<uint32_t>(batch[t * width + i]))
          << "token " << t << " index " << i;
    }
  }
}

// q and k rotated in one launch (RopeQK) get the bits Rope gives each, for
// grouped-query shapes (32 q heads over 8 k heads, normal, with factors;
// 28 over 4, neox; partial rotary).
TEST_F(RopeCudaTest, QAndKInOneLaunchGetTheirOwnRopeBits) {
  uint32_t seed = 40;
  for (const auto& [q_heads, k_heads, head_dim, rope_dim, neox, factors] :
       {std::tuple{32, 8, 128, 128, false, true}, std::tuple{28, 4, 128, 128, true, false},
        std::tuple{7, 7, 96, 64, true, false}}) {
    const int n_tokens = 5;
    const RopeParams p = Params(q_heads, head_dim, rope_dim, neox, 500000.f);
    RopeParams kp = p;
    kp.n_heads = k_heads;
    const std::vector<float> q = RandomVector(static_cast<size_t>(n_tokens) * q_heads * head_dim, -2.0f, 2.0f, seed++);
    const std::vector<float> k = RandomVector(static_cast<size_t>(n_tokens) * k_heads * head_dim, -2.0f, 2.0f, seed++);
    const std::vector<int32_t> positions = Positions(n_tokens, seed++);
    const std::vector<float> f = factors ? RandomVector(rope_dim / 2, 1.0f, 8.0f, seed++) : std::vector<float>{};
    auto d_q = Upload(q);
    auto d_k = Upload(k);
    auto d_positions = Upload(positions);
    auto d_factors = Upload(f.empty() ? std::vector<float>{0.0f} : f);
    RopeParams dp = p;
    dp.freq_factors = f.empty() ? nullptr : d_factors.get();
    const cuda::ApiCounts before = cuda::CurrentApiCounts();
    ASSERT_TRUE(cuda::RopeQK(d_q.get(), d_k.get(), d_positions.get(), n_tokens, dp, k_heads, stream()).ok());
    EXPECT_EQ((cuda::CurrentApiCounts() - before).launches, 1u);
    EXPECT_EQ(d_q.Download(stream()), Run(q, positions, p, f));
    EXPECT_EQ(d_k.Download(stream()), Run(k, positions, kp, f));
  }
  auto both = Upload(std::vector<float>(2 * 64, 1.0f));
  auto positions = Upload(std::vector<int32_t>{0});
  EXPECT_EQ(cuda::RopeQK(both.get(), both.get() + 32, positions.get(), 1, Params(1, 64, 64, false, 1e4f), 1, stream())
                .code(),
            absl::StatusCode::kInvalidArgument)
      << "q and k overlapping";
}

TEST_F(RopeCudaTest, RejectsBadArgumentsWithoutLaunching) {
  const std::vector<float> before = RandomVector(2 * 8, -1.0f, 1.0f, 5);
  auto x = Upload(before);
  auto positions = Upload(std::vector<int32_t>{3, 4});
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    float* x;
    const int32_t* positions;
    int n_tokens;
    RopeParams p;
    std::string needle;
  };
  for (const Case& c : {Case{nullptr, positions.get(), 2, Params(2, 4, 4, false, 10000.f), "x is null"},
                        Case{x.get(), nullptr, 2, Params(2, 4, 4, false, 10000.f), "positions is null"},
                        Case{x.get(), positions.get(), 0, Params(2, 4, 4, false, 10000.f), "n_tokens (0)"},
                        Case{x.get(), positions.get(), 2, Params(0, 4, 4, false, 10000.f), "n_heads (0)"},
                        Case{x.get(), positions.get(), 2, Params(2, -4, 4, false, 10000.f), "head_dim (-4)"},
                        Case{x.get(), positions.get(), 2, Params(2, 4, 3, false, 10000.f), "rope_dim (3)"},
                        Case{x.get(), positions.get(), 2, Params(2, 4, 0, false, 10000.f), "rope_dim (0)"},
                        Case{x.get(), positions.get(), 2, Params(2, 4, 6, false, 10000.f), "rope_dim (6)"},
                        Case{x.get(), positions.get(), 2, Params(2, 4, 4, false, 0.0f), "freq_base (0)"},
                        Case{x.get(), positions.get(), 2, Params(2, 4, 4, false, inf), "freq_base (inf)"},
                        Case{x.get(), positions.get(), 2, Params(2, 4, 4, false, nan), "freq_base (nan)"}}) {
    testing::ExpectInvalidArgument(cuda::Rope(c.x, c.positions, c.n_tokens, c.p, stream()), "Rope", c.needle);
  }
  EXPECT_EQ(x.Download(stream()), before) << "a rejected call wrote to x";
}

}  // namespace
}  // namespace octo
