// Embeddings from the forward pass: one sequence's final-normed hidden
// states (forward.h, SequenceStep::hidden) pooled into one vector, chunk by
// chunk as the scheduler feeds a long input, and the vector shaped as the
// APIs ask (cut to `dimensions`, L2-normalised).
//
// Pooling (storage/model_config.h): kMean averages every token's state,
// kCls takes the first token's, kLast the last token's. Sums run in double
// and in token order, so a sequence's embedding has the same bits alone or
// batched, in one chunk or several (the pass gives each row the same bits
// either way).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/model_config.h"

namespace octo {

class EmbeddingPool {
 public:
  // A sequence of n_tokens (> 0) tokens, with dim-wide states. kRank is
  // not a pooling for embeddings: the caller refuses it first.
  EmbeddingPool(Pooling pooling, int dim, int n_tokens);

  // Whether the step feeding tokens from `first` needs every row's state
  // (SequenceStep::all_logits), or only its last.
  bool AllRows(int first) const;
  // The states of the step feeding tokens [first, first + n): n rows when
  // AllRows(first), else one (the last token's). Steps come in order.
  void Add(std::span<const float> rows, int first, int n);
  bool complete() const { return added_ == n_tokens_; }
  // The pooled vector (dim values), once complete.
  std::vector<float> Result() const;

 private:
  Pooling pooling_;
  int dim_, n_tokens_;
  int added_ = 0;
  std::vector<double> sum_;
};

// The embedding an API returns: its first `dimensions` values (0: all;
// more than the vector has is INVALID_ARGUMENT), scaled to unit L2 length
// when `normalize` (a zero vector stays zero).
absl::StatusOr<std::vector<float>> ShapeEmbedding(std::vector<float> pooled, int dimensions, bool normalize);

}  // namespace octo
