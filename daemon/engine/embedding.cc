#include "daemon/engine/embedding.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace octo {

EmbeddingPool::EmbeddingPool(Pooling pooling, int dim, int n_tokens)
    : pooling_(pooling), dim_(dim), n_tokens_(n_tokens), sum_(static_cast<size_t>(dim), 0.0) {}

bool EmbeddingPool::AllRows(int first) const {
  return pooling_ == Pooling::kMean || (pooling_ == Pooling::kCls && first == 0);
}

void EmbeddingPool::Add(std::span<const float> rows, int first, int n) {
  auto take = [&](int row) {
    for (int i = 0; i < dim_; ++i) sum_[i] += rows[static_cast<size_t>(row) * dim_ + i];
  };
  if (pooling_ == Pooling::kMean) {
    for (int row = 0; row < n; ++row) take(row);
  } else if (pooling_ == Pooling::kCls && first == 0) {
    take(0);
  } else if (pooling_ == Pooling::kLast && first + n == n_tokens_) {
    take(0);  // the step's one row: its last token's
  }
  added_ += n;
}

std::vector<float> EmbeddingPool::Result() const {
  const double scale = pooling_ == Pooling::kMean ? 1.0 / n_tokens_ : 1.0;
  std::vector<float> out(sum_.size());
  for (size_t i = 0; i < sum_.size(); ++i) out[i] = static_cast<float>(sum_[i] * scale);
  return out;
}

absl::StatusOr<std::vector<float>> ShapeEmbedding(std::vector<float> pooled, int dimensions, bool normalize) {
  if (dimensions < 0 || static_cast<size_t>(dimensions) > pooled.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dimensions is ", dimensions, "; this model's embeddings have 1 to ", pooled.size()));
  }
  if (dimensions > 0) pooled.resize(static_cast<size_t>(dimensions));
  if (normalize) {
    double norm = 0;
    for (float v : pooled) norm += static_cast<double>(v) * v;
    norm = std::sqrt(norm);
    if (norm > 0) {
      for (float& v : pooled) v = static_cast<float>(v / norm);
    }
  }
  return pooled;
}

}  // namespace octo
