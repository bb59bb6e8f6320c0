// Perplexity of a model over a token stream, computed the way llama.cpp's
// `llama-perplexity` does so the numbers can be compared:
//   - the tokens are cut into chunks of n_ctx; a last partial chunk is dropped;
//   - with a BOS token, each chunk's first token is replaced by BOS;
//   - each chunk runs in one pass from an empty cache, and only its second
//     half is scored (every scored token then has at least n_ctx/2 of context):
//     NLL = -log softmax(logits[i])[tokens[i + 1]] for i in [n_ctx/2, n_ctx - 1);
//   - perplexity = exp(mean NLL over all scored tokens).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/engine/model.h"

namespace octo {

struct PerplexityResult {
  double perplexity = 0;
  double mean_nll = 0;
  int scored_tokens = 0;
  std::vector<double> chunk_perplexity;  // running perplexity after each chunk
};

// INVALID_ARGUMENT when n_ctx < 2 or exceeds the model's context, or when
// there are fewer than n_ctx tokens (not even one chunk). on_chunk (may be
// empty) is called after each chunk with (chunks done, chunks in all,
// running perplexity).
absl::StatusOr<PerplexityResult> Perplexity(Model& model, std::span<const int32_t> tokens, int n_ctx,
                                            int32_t bos,
                                            const std::function<void(int, int, double)>& on_chunk);

}  // namespace octo
