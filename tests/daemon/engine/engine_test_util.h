// Small helpers the engine tests share: greedy decoding and log-softmax on
// top of Model, written plainly so the tests read as what they check.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/engine/model.h"

namespace octo::testing {

// log(softmax(logits)) in double.
std::vector<double> LogSoftmax(std::span<const float> logits);

// Index of the largest logit (the lowest index on a tie).
int32_t Argmax(std::span<const float> logits);

struct GreedyRun {
  std::vector<int32_t> tokens;              // generated
  std::vector<std::vector<float>> logits;   // the logits each token was chosen from
};

// Prefills `prompt`, then decodes n_new tokens greedily, one pass per token.
absl::StatusOr<GreedyRun> Greedy(Model& model, std::span<const int32_t> prompt, int n_new);

// One prefill pass over `tokens` with every position's logits: row i holds
// the prediction for position i + 1.
absl::StatusOr<std::vector<std::vector<float>>> TeacherForced(Model& model, std::span<const int32_t> tokens);

}  // namespace octo::testing
