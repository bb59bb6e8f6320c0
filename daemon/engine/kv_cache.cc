#include "daemon/engine/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace octo {

KvCache::KvCache(const ModelConfig& config, int max_positions, std::shared_ptr<Backend> backend)
    : n_layers_(static_cast<int>(config.n_layers)),
      row_elements_(static_cast<int>(config.n_kv_heads * config.head_dim)),
      max_positions_(max_positions),
      backend_(std::move(backend)) {}

uint64_t KvCache::bytes() const { return data_.size(); }

int KvCache::CapacityFor(int positions) const {
  if (positions <= capacity_) return capacity_;
  int capacity = std::max(capacity_, 1);
  while (capacity < positions) capacity *= 2;
  return std::min(std::max(capacity, kKvGrowPositions), max_positions_);
}

uint64_t KvCache::BytesAfterReserve(int n) const {
  const int capacity = CapacityFor(std::min(size_ + std::max(n, 0), max_positions_));
  return static_cast<uint64_t>(n_layers_) * 2 * capacity * row_elements_ * sizeof(uint16_t);
}

absl::Status KvCache::Reserve(int n) {
  if (n < 0 || size_ + static_cast<int64_t>(n) > max_positions_) {
    return absl::ResourceExhaustedError(absl::StrCat("the sequence would hold ", size_ + static_cast<int64_t>(n),
                                                     " positions; its context limit is ", max_positions_));
  }
  if (size_ + n <= capacity_) return absl::OkStatus();
  const int new_capacity = CapacityFor(size_ + n);
  absl::StatusOr<BackendBuffer> grown =
      backend_->Allocate(static_cast<size_t>(n_layers_) * 2 * new_capacity * row_elements_ * sizeof(uint16_t));
  if (!grown.ok()) return grown.status();
  const size_t used = static_cast<size_t>(size_) * row_elements_;
  for (int l = 0; l < n_layers_ && used > 0; ++l) {
    for (int kind = 0; kind < 2; ++kind) {
      const uint16_t* from = data_.as<uint16_t>() + (static_cast<size_t>(l) * 2 + kind) * capacity_ * row_elements_;
      uint16_t* to = grown->as<uint16_t>() + (static_cast<size_t>(l) * 2 + kind) * new_capacity * row_elements_;
      absl::Status copied = backend_->Copy(to, from, used * sizeof(uint16_t));
      if (!copied.ok()) return copied;
    }
  }
  data_ = std::move(*grown);
  capacity_ = new_capacity;
  return absl::OkStatus();
}

void KvCache::Truncate(int n) { size_ = std::clamp(n, 0, size_); }

}  // namespace octo
