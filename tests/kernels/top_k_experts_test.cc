// TopKExperts: routing against a double-precision reference, the order of
// the chosen experts (ties included) and the normalization.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace octo {
namespace {

// Weights, per element: |got - want| <= kRelTol * want. They are softmax
// probabilities (cpu::Softmax: within 7e-7 of exact for logits in [-8, 8], see
// softmax_test.cc), and normalizing adds a float sum rounding and a division
// (6e-8 each). 2e-6 leaves room.
constexpr double kRelTol = 2e-6;

// Router logits in [-8, 8].
std::vector<float> RandomLogits(size_t n, uint32_t seed) { return testing::RandomVector(n, -8.0f, 8.0f, seed); }

struct Routing {
  std::vector<int32_t> ids;  // (n_tokens, k)
  std::vector<float> weights;  // (n_tokens, k)
};

Routing Route(const std::vector<float>& logits, int n_tokens, int n_experts, int k,
              bool normalize) {
  Routing r{std::vector<int32_t>(static_cast<size_t>(n_tokens) * k, -1),
            std::vector<float>(static_cast<size_t>(n_tokens) * k, -1.0f)};
  const absl::Status status = cpu::TopKExperts(logits.data(), n_tokens, n_experts, k, normalize,
                                               r.ids.data(), r.weights.data());
  EXPECT_TRUE(status.ok()) << status;
  return r;
}

// The plain way: probabilities in double, a stable sort by probability.
// Distinct random logits make ties between different ids impossible here.
void ExpectMatchesReference(const std::vector<float>& logits, int n_tokens, int n_experts, int k,
                            bool normalize, const Routing& got, const std::string& what) {
  for (int t = 0; t < n_tokens; ++t) {
    const float* row = logits.data() + static_cast<size_t>(t) * n_experts;
    const double max = *std::max_element(row, row + n_experts);
    std::vector<double> p(n_experts);
    double sum = 0;
    for (int e = 0; e < n_experts; ++e) sum += p[e] = std::exp(row[e] - max);
    for (double& v : p) v /= sum;
    std::vector<int> order(n_experts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    double chosen = 0;
    for (int j = 0; j < k; ++j) chosen += p[order[j]];

    for (int j = 0; j < k; ++j) {
      const size_t at = static_cast<size_t>(t) * k + j;
      ASSERT_EQ(got.ids[at], order[j]) << what << " token " << t << " rank " << j;
      const double want = normalize ? p[order[j]] / chosen : p[order[j]];
      EXPECT_LE(std::abs(got.weights[at] - want), kRelTol * want)
          << what << " token " << t << " rank " << j << ": got " << got.weights[at] << ", want "
          << want;
    }
  }
}

TEST(TopKExpertsCpuTest, MatchesDoublePrecisionReference) {
  struct Shape {
    int n_tokens, n_experts, k;
  };
  // mixtral (8, 2), qwen2moe (60, 4), qwen3moe (128, 8), k == 1, k == n.
  const Shape shapes[] = {{1, 8, 2}, {5, 8, 2}, {3, 60, 4}, {7, 128, 8}, {4, 16, 1}, {2, 9, 9}};
  uint32_t seed = 1;
  for (const Shape& s : shapes) {
    const std::vector<float> logits =
        RandomLogits(static_cast<size_t>(s.n_tokens) * s.n_experts, seed++);
    for (bool normalize : {false, true}) {
      const std::string what = absl::StrFormat("n_tokens=%d n_experts=%d k=%d normalize=%d",
                                               s.n_tokens, s.n_experts, s.k, normalize);
      const Routing got = Route(logits, s.n_tokens, s.n_experts, s.k, normalize);
      ExpectMatchesReference(logits, s.n_tokens, s.n_experts, s.k, normalize, got, what);
    }
  }
}

TEST(TopKExpertsCpuTest, LargestFirstAndTiesGoToTheLowerId) {
  // Experts 1 and 3 tie for first, 0 and 5 for third.
  const std::vector<float> logits = {2.0f, 3.0f, -1.0f, 3.0f, 1.0f, 2.0f};
  const Routing got = Route(logits, 1, 6, 4, /*normalize=*/false);
  EXPECT_EQ(got.ids, (std::vector<int32_t>{1, 3, 0, 5}));
  EXPECT_EQ(got.weights[0], got.weights[1]);
  EXPECT_EQ(got.weights[2], got.weights[3]);
  EXPECT_GT(got.weights[1], got.weights[2]);
}

// Unnormalized weights are exactly the probabilities cpu::Softmax gives.
TEST(TopKExpertsCpuTest, WeightsAreTheSoftmaxProbabilities) {
  const int n_experts = 60, k = 4;
  const std::vector<float> logits = RandomLogits(n_experts, 77);
  const Routing got = Route(logits, 1, n_experts, k, /*normalize=*/false);
  std::vector<float> probs = logits;
  ASSERT_TRUE(cpu::Softmax(probs.data(), 1, n_experts).ok());
  for (int j = 0; j < k; ++j) EXPECT_EQ(got.weights[j], probs[got.ids[j]]) << "rank " << j;
}

TEST(TopKExpertsCpuTest, NormalizedWeightsSumToOne) {
  const int n_tokens = 16, n_experts = 128, k = 8;
  const std::vector<float> logits = RandomLogits(static_cast<size_t>(n_tokens) * n_experts, 5);
  const Routing plain = Route(logits, n_tokens, n_experts, k, /*normalize=*/false);
  const Routing normalized = Route(logits, n_tokens, n_experts, k, /*normalize=*/true);
  EXPECT_EQ(plain.ids, normalized.ids) << "normalizing must not change the choice";
  for (int t = 0; t < n_tokens; ++t) {
    double sum = 0, plain_sum = 0;
    for (int j = 0; j < k; ++j) {
      sum += normalized.weights[t * k + j];
      plain_sum += plain.weights[t * k + j];
    }
    EXPECT_NEAR(sum, 1.0, 1e-6) << "token " << t;
    EXPECT_LT(plain_sum, 0.999) << "token " << t << ": the test needs weights that do not sum to 1";
  }
}

TEST(TopKExpertsCpuTest, TokensAreIndependent) {
  const int n_experts = 8, k = 2;
  const std::vector<float> logits = RandomLogits(3 * n_experts, 21);
  const Routing all = Route(logits, 3, n_experts, k, true);
  const std::vector<float> last(logits.begin() + 2 * n_experts, logits.end());
  const Routing alone = Route(last, 1, n_experts, k, true);
  for (int j = 0; j < k; ++j) {
    EXPECT_EQ(all.ids[2 * k + j], alone.ids[j]);
    EXPECT_EQ(all.weights[2 * k + j], alone.weights[j]);
  }
}

TEST(TopKExpertsCpuTest, RejectsBadArguments) {
  const float logits[4] = {1, 2, 3, 4};
  int32_t ids[4] = {-7, -7, -7, -7};
  float weights[4] = {-7, -7, -7, -7};
  struct Case {
    const float* logits;
    int n_tokens, n_experts, k;
    int32_t* ids;
    float* weights;
    const char* names;  // what the message must name
  };
  const Case cases[] = {
      {nullptr, 1, 4, 2, ids, weights, "router_logits is null"},
      {logits, 1, 4, 2, nullptr, weights, "expert_ids is null"},
      {logits, 1, 4, 2, ids, nullptr, "weights is null"},
      {logits, 0, 4, 2, ids, weights, "n_tokens (0)"},
      {logits, 1, 0, 1, ids, weights, "n_experts (0)"},
      {logits, 1, 4, 0, ids, weights, "k (0)"},
      {logits, 1, 4, 5, ids, weights, "k (5)"},
      {logits, 1, 4, -1, ids, weights, "k (-1)"},
  };
  for (const Case& c : cases) {
    const absl::Status status =
        cpu::TopKExperts(c.logits, c.n_tokens, c.n_experts, c.k, true, c.ids, c.weights);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find("TopKExperts"), std::string::npos) << status;
    EXPECT_NE(status.message().find(c.names), std::string::npos) << status;
  }
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(ids[i], -7) << "a rejected call wrote to expert_ids";
    EXPECT_EQ(weights[i], -7.0f) << "a rejected call wrote to weights";
  }
}

}  // namespace
}  // namespace octo
