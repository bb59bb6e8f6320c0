#include "daemon/engine/perplexity.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

// -log softmax(logits)[target], in double.
double NegativeLogLikelihood(std::span<const float> logits, int32_t target) {
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
  return std::log(sum) + max - logits[target];
}

}  // namespace

absl::StatusOr<PerplexityResult> Perplexity(Model& model, std::span<const int32_t> tokens, int n_ctx,
                                            int32_t bos,
                                            const std::function<void(int, int, double)>& on_chunk) {
  if (n_ctx < 2 || static_cast<uint32_t>(n_ctx) > model.config().context_length) {
    return absl::InvalidArgumentError(absl::StrCat("context of ", n_ctx, " tokens: it must be 2..",
                                                   model.config().context_length, " for this model"));
  }
  const int n_chunks = static_cast<int>(tokens.size() / n_ctx);
  if (n_chunks == 0) {
    return absl::InvalidArgumentError(absl::StrCat("the text has ", tokens.size(),
                                                   " tokens; perplexity needs at least one chunk of ", n_ctx));
  }
  const size_t vocab = model.config().vocab_size;
  PerplexityResult result;
  double nll_sum = 0;
  std::vector<float> logits;
  for (int c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + static_cast<size_t>(c) * n_ctx,
                               tokens.begin() + static_cast<size_t>(c + 1) * n_ctx);
    if (bos >= 0) chunk[0] = bos;
    std::unique_ptr<KvCache> kv = model.NewCache(n_ctx);
    const SequenceStep step{.kv = kv.get(), .tokens = chunk, .all_logits = true};
    OCTO_RETURN_IF_ERROR(Annotate(model.Forward(std::span<const SequenceStep>(&step, 1), logits),
                                  absl::StrCat("chunk ", c)));
    for (int i = n_ctx / 2; i < n_ctx - 1; ++i) {
      const std::span<const float> row(logits.data() + static_cast<size_t>(i) * vocab, vocab);
      // The target is the text's own next token (not the BOS substitute).
      nll_sum += NegativeLogLikelihood(row, tokens[static_cast<size_t>(c) * n_ctx + i + 1]);
      ++result.scored_tokens;
    }
    result.chunk_perplexity.push_back(std::exp(nll_sum / result.scored_tokens));
    if (on_chunk) on_chunk(c + 1, n_chunks, result.chunk_perplexity.back());
  }
  result.mean_nll = nll_sum / result.scored_tokens;
  result.perplexity = std::exp(result.mean_nll);
  return result;
}

}  // namespace octo
