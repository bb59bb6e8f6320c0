// cuda::TopKExperts against cpu::TopKExperts on the same logits: the same
// ids, the weights to rounding, ties and NaN rows as ops.h says.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

using testing::ExpectClose;
using testing::Tolerance;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// The weights' tolerance, relative, in units of u = 2^-24. A probability is
// cuda::Softmax's: (22 + ceil(n_experts / 1024)) u from the CPU's (the
// derivation is in softmax_cuda_test.cc). Normalized, w_j = p_j / sum: the k
// chosen p's errors reach the sum too (twice that, at worst), the CUDA sum of
// k floats in order rounds k - 1 times, the CPU's (double) once, and each
// side rounds the division once: 2 (22 + ceil(n_experts / 1024)) u + (k + 2) u.
// In the executor expf is the host's, so only the softmax's sum order and
// the normalizing sum differ (measured worst, all shapes of MatchesCpu:
// 2.4e-7 relative).
Tolerance WeightTolerance(int n_experts, int k, bool normalize) {
  const int softmax = 22 + (n_experts + 1023) / 1024;
  return Tolerance{(normalize ? 2 * softmax + k + 2 : softmax) * 0x1p-24, 1e-38};
}

// Logits whose probabilities are far apart, so the ranking cannot depend on
// rounding: a shuffled ladder -2 + 0.01 * rank plus a jitter under 0.004, so
// neighbours' probabilities differ by a factor >= e^0.006, thousands of
// roundings.
std::vector<float> LadderLogits(int n_tokens, int n_experts, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> jitter(0.0f, 0.004f);
  std::vector<float> logits;
  std::vector<int> rank(n_experts);
  for (int t = 0; t < n_tokens; ++t) {
    std::iota(rank.begin(), rank.end(), 0);
    std::shuffle(rank.begin(), rank.end(), rng);
    for (int e = 0; e < n_experts; ++e) logits.push_back(-2.0f + 0.01f * rank[e] + jitter(rng));
  }
  return logits;
}

struct Routing {
  std::vector<int32_t> ids;    // (n_tokens, k)
  std::vector<float> weights;  // (n_tokens, k)
};

class TopKExpertsCudaTest : public testing::CudaOpTest {
 protected:
  Routing Run(const std::vector<float>& logits, int n_tokens, int n_experts, int k, bool normalize) {
    auto d_logits = Upload(logits);
    auto d_ids = Output<int32_t>(static_cast<size_t>(n_tokens) * k);
    auto d_weights = Output<float>(static_cast<size_t>(n_tokens) * k);
    const absl::Status launched =
        cuda::TopKExperts(d_logits.get(), n_tokens, n_experts, k, normalize, d_ids.get(), d_weights.get(), stream());
    EXPECT_TRUE(launched.ok()) << launched;
    return Routing{d_ids.Download(stream()), d_weights.Download(stream())};
  }
  Routing Want(const std::vector<float>& logits, int n_tokens, int n_experts, int k, bool normalize) {
    Routing r{std::vector<int32_t>(static_cast<size_t>(n_tokens) * k),
              std::vector<float>(static_cast<size_t>(n_tokens) * k)};
    EXPECT_TRUE(
        cpu::TopKExperts(logits.data(), n_tokens, n_experts, k, normalize, r.ids.data(), r.weights.data()).ok());
    return r;
  }
};

// mixtral (8 experts, k 2, normalized), qwen2moe (60, 4, not), qwen3moe
// (128, 8), 256 experts (deepseek-like), k == 1, k == n_experts, experts not
// a multiple of 32, past one 1024-thread block (1500: threads stride); 1, 9
// and 33 tokens.
TEST_F(TopKExpertsCudaTest, MatchesCpu) {
  struct Shape {
    int n_tokens, n_experts, k;
    bool normalize;
  };
  uint32_t seed = 1;
  for (const Shape& s : {Shape{1, 8, 2, true}, Shape{9, 8, 2, true}, Shape{9, 60, 4, false}, Shape{9, 128, 8, true},
                         Shape{33, 128, 8, true}, Shape{5, 256, 8, true}, Shape{4, 33, 1, true}, Shape{3, 7, 7, false},
                         Shape{3, 7, 7, true}, Shape{2, 1500, 6, true}}) {
    const std::string what = absl::StrFormat("n_tokens=%d n_experts=%d k=%d normalize=%d", s.n_tokens, s.n_experts,
                                             s.k, s.normalize);
    const std::vector<float> logits = LadderLogits(s.n_tokens, s.n_experts, seed++);
    const Routing got = Run(logits, s.n_tokens, s.n_experts, s.k, s.normalize);
    const Routing want = Want(logits, s.n_tokens, s.n_experts, s.k, s.normalize);
    EXPECT_EQ(got.ids, want.ids) << what;
    ExpectClose(got.weights, want.weights, s.k, WeightTolerance(s.n_experts, s.k, s.normalize), what);
  }
}

// Equal logits give bit-equal probabilities on each side, so the order among
// them is the ids' on both: row 0 has ties at the top and inside the top k,
// row 1 is all equal (ids 0..k-1), row 2 masks experts with -inf (p exactly
// 0, ranked last, by id, once the finite ones are taken).
TEST_F(TopKExpertsCudaTest, TiesGoToTheLowerIdAsOnTheCpu) {
  const int n_experts = 40, k = 6;
  std::vector<float> logits = testing::RandomVector(3 * n_experts, -3.0f, 0.0f, 9);
  for (int e : {3, 11, 29}) logits[e] = 2.0f;  // three-way tie for first
  for (int e : {0, 39}) logits[e] = 1.0f;      // two-way tie for fourth
  std::fill(logits.begin() + n_experts, logits.begin() + 2 * n_experts, 0.25f);
  std::fill(logits.begin() + 2 * n_experts, logits.end(), -kInf);
  logits[2 * n_experts + 30] = 1.0f;
  logits[2 * n_experts + 7] = 0.5f;
  for (bool normalize : {false, true}) {
    const Routing got = Run(logits, 3, n_experts, k, normalize);
    const Routing want = Want(logits, 3, n_experts, k, normalize);
    EXPECT_EQ(got.ids, want.ids) << "normalize=" << normalize;
    EXPECT_EQ(std::vector<int32_t>(got.ids.begin(), got.ids.begin() + 5), (std::vector<int32_t>{3, 11, 29, 0, 39}));
    EXPECT_EQ(std::vector<int32_t>(got.ids.begin() + k, got.ids.begin() + 2 * k),
              (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(std::vector<int32_t>(got.ids.begin() + 2 * k, got.ids.end()), (std::vector<int32_t>{30, 7, 0, 1, 2, 3}));
    ExpectClose(got.weights, want.weights, k, WeightTolerance(n_experts, k, normalize),
                absl::StrFormat("normalize=%d", normalize));
  }
}

// A row with a NaN or +inf logit, or only -inf, has NaN probabilities: NaN
// weights on both sides. The ids are then unspecified by ops.h; CUDA gives
// 0..k-1 (NaN ranks below every probability, ties by id).
TEST_F(TopKExpertsCudaTest, NanOrInfiniteLogitsGiveNanWeights) {
  const int n_experts = 16, k = 3;
  std::vector<float> logits = testing::RandomVector(3 * n_experts, -3.0f, 3.0f, 10);
  logits[5] = kNan;
  logits[n_experts + 9] = kInf;
  std::fill(logits.begin() + 2 * n_experts, logits.end(), -kInf);
  for (bool normalize : {false, true}) {
    const Routing got = Run(logits, 3, n_experts, k, normalize);
    const Routing want = Want(logits, 3, n_experts, k, normalize);
    for (size_t i = 0; i < got.weights.size(); ++i) {
      EXPECT_TRUE(std::isnan(got.weights[i])) << "normalize=" << normalize << " index " << i;
      EXPECT_TRUE(std::isnan(want.weights[i])) << "normalize=" << normalize << " index " << i;
    }
    EXPECT_EQ(got.ids, (std::vector<int32_t>{0, 1, 2, 0, 1, 2, 0, 1, 2})) << "normalize=" << normalize;
  }
}

// A token's routing does not depend on the other tokens of the call: the
// same bits alone as in a batch of 9.
TEST_F(TopKExpertsCudaTest, TokensAreIndependent) {
  const int n_tokens = 9, n_experts = 128, k = 8;
  const std::vector<float> logits = LadderLogits(n_tokens, n_experts, 12);
  const Routing batch = Run(logits, n_tokens, n_experts, k, true);
  for (int t = 0; t < n_tokens; t += 4) {
    const std::vector<float> row(logits.begin() + static_cast<size_t>(t) * n_experts,
                                 logits.begin() + static_cast<size_t>(t + 1) * n_experts);
    const Routing alone = Run(row, 1, n_experts, k, true);
    for (int j = 0; j < k; ++j) {
      const size_t at = static_cast<size_t>(t) * k + j;
      EXPECT_EQ(alone.ids[j], batch.ids[at]) << "token " << t << " rank " << j;
      EXPECT_EQ(std::bit_cast<uint32_t>(alone.weights[j]), std::bit_cast<uint32_t>(batch.weights[at]))
          << "token " << t << " rank " << j;
    }
  }
}

TEST_F(TopKExpertsCudaTest, RejectsBadArgumentsWithoutLaunching) {
  auto logits = Upload(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
  auto ids = Output<int32_t>(8);
  auto weights = Output<float>(8);
  struct Case {
    const float* logits;
    int n_tokens, n_experts, k;
    int32_t* ids;
    float* weights;
    std::string needle;
  };
  for (const Case& c : {Case{nullptr, 2, 4, 2, ids.get(), weights.get(), "router_logits is null"},
                        Case{logits.get(), 2, 4, 2, nullptr, weights.get(), "expert_ids is null"},
                        Case{logits.get(), 2, 4, 2, ids.get(), nullptr, "weights is null"},
                        Case{logits.get(), 0, 4, 2, ids.get(), weights.get(), "n_tokens (0)"},
                        Case{logits.get(), 2, 0, 2, ids.get(), weights.get(), "n_experts (0)"},
                        Case{logits.get(), 2, 4, 0, ids.get(), weights.get(), "k (0)"},
                        Case{logits.get(), 2, 4, 5, ids.get(), weights.get(), "k (5)"}}) {
    testing::ExpectInvalidArgument(
        cuda::TopKExperts(c.logits, c.n_tokens, c.n_experts, c.k, true, c.ids, c.weights, stream()), "TopKExperts",
        c.needle);
  }
  for (int32_t id : ids.Download(stream())) EXPECT_EQ(id, -1) << "a rejected call wrote to expert_ids";
  for (float w : weights.Download(stream())) EXPECT_TRUE(std::isnan(w)) << "a rejected call wrote to weights";
}

}  // namespace
}  // namespace octo
