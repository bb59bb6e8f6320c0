#include "tests/daemon/engine/engine_test_util.h"

#include <algorithm>
#include <cmath>

#include "storage/status_macros.h"

namespace octo::testing {

std::vector<double> LogSoftmax(std::span<const float> logits) {
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(l - max);
  const double log_sum = std::log(sum) + max;
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - log_sum;
  return out;
}

int32_t Argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

absl::StatusOr<GreedyRun> Greedy(Model& model, std::span<const int32_t> prompt, int n_new) {
  std::unique_ptr<KvCache> kv = model.NewCache(static_cast<int>(prompt.size()) + n_new);
  GreedyRun run;
  std::vector<float> logits;
  std::vector<int32_t> next(prompt.begin(), prompt.end());
  for (int i = 0; i < n_new; ++i) {
    const SequenceStep step{.kv = kv.get(), .tokens = next};
    OCTO_RETURN_IF_ERROR(model.Forward(std::span<const SequenceStep>(&step, 1), logits));
    const int32_t token = Argmax(logits);
    run.tokens.push_back(token);
    run.logits.push_back(logits);
    next.assign(1, token);
  }
  return run;
}

absl::StatusOr<std::vector<std::vector<float>>> TeacherForced(Model& model, std::span<const int32_t> tokens) {
  std::unique_ptr<KvCache> kv = model.NewCache(static_cast<int>(tokens.size()));
  std::vector<float> logits;
  const SequenceStep step{.kv = kv.get(), .tokens = tokens, .all_logits = true};
  OCTO_RETURN_IF_ERROR(model.Forward(std::span<const SequenceStep>(&step, 1), logits));
  const size_t vocab = model.config().vocab_size;
  std::vector<std::vector<float>> rows(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    rows[i].assign(logits.begin() + i * vocab, logits.begin() + (i + 1) * vocab);
  }
  return rows;
}

}  // namespace octo::testing
