// Mixture-of-experts routing on the CPU, the steps llama.cpp's graph takes:
// soft_max, top_k, get_rows and (when normalizing) sum_rows, clamp, div.
// Semantics: kernels/ops.h.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cpu/softmax_row.h"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cpu {
namespace {

// llama.cpp clamps the sum of the chosen weights to at least 2^-14, the
// smallest normal fp16, before dividing by it. With softmax weights the sum is
// at least 1 / n_experts, so this bites only past 16384 experts.
constexpr float kMinWeightSum = 6.103515625e-5f;

}  // namespace

absl::Status TopKExperts(const float* router_logits, int n_tokens, int n_experts, int k,
                         bool normalize, int32_t* expert_ids, float* weights) {
  absl::Status args =
      CheckTopKExpertsArgs(router_logits, n_tokens, n_experts, k, expert_ids, weights);
  if (!args.ok()) return args;

  std::vector<float> probs(n_experts);   // (n_experts)
  std::vector<int32_t> order(n_experts);  // expert ids, best first after the sort
  for (int t = 0; t < n_tokens; ++t) {
    const float* logits = router_logits + static_cast<size_t>(t) * n_experts;
    int32_t* ids = expert_ids + static_cast<size_t>(t) * k;  // (k)
    float* w = weights + static_cast<size_t>(t) * k;         // (k)

    std::copy(logits, logits + n_experts, probs.begin());
    SoftmaxRow(probs.data(), n_experts);

    // Largest probability first, the lower id first among equals: a strict
    // total order, so the choice never depends on the sort's internals.
    for (int e = 0; e < n_experts; ++e) order[e] = e;
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) {
                        return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
                      });

    for (int j = 0; j < k; ++j) {
      ids[j] = order[j];
      w[j] = probs[order[j]];
    }
    if (normalize) {
      // ggml's sum_rows: a double sum rounded to float; then a float division.
      double sum = 0.0;
      for (int j = 0; j < k; ++j) sum += static_cast<double>(w[j]);
      const float sum_f = std::max(static_cast<float>(sum), kMinWeightSum);
      for (int j = 0; j < k; ++j) w[j] /= sum_f;
    }
  }
  return absl::OkStatus();
}

}  // namespace octo::cpu
