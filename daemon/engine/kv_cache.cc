#include "daemon/engine/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "storage/status_macros.h"

namespace octo {

KvCache::KvCache(const ModelConfig& config, int max_positions, std::shared_ptr<Backend> backend, KvCacheTypes types)
    : n_layers_(static_cast<int>(config.n_layers)),
      row_elements_(static_cast<int>(config.n_kv_heads * config.head_dim)),
      types_(types),
      k_row_bytes_(RowBytes(types.k, row_elements_)),
      v_row_bytes_(RowBytes(types.v, row_elements_)),
      max_positions_(max_positions),
      backend_(std::move(backend)) {
  // An encoder's layers share one slot: each layer's keys and values are
  // used by that layer's attention only, over a sequence that comes whole.
  const bool encoder = IsEncoderArchitecture(config.architecture);
  for (uint32_t l = 0; l < config.n_layers; ++l) {
    const bool delta = IsDeltaNetLayer(config, l);
    kv_slot_.push_back(delta ? -1 : encoder ? 0 : n_kv_layers_++);
    delta_slot_.push_back(delta ? n_delta_layers_++ : -1);
  }
  if (encoder) n_kv_layers_ = 1;
  if (n_delta_layers_ > 0) {
    const size_t conv_channels = 2 * size_t{config.ssm_k_heads} * config.ssm_head_dim +
                                 size_t{config.ssm_v_heads} * config.ssm_head_dim;
    conv_floats_ = (config.ssm_conv_kernel - 1) * conv_channels;
    state_floats_ = size_t{config.ssm_v_heads} * config.ssm_head_dim * config.ssm_head_dim;
  }
}

absl::Status KvCache::CheckTypes(const ModelConfig& config, KvCacheTypes types) {
  const int64_t row = int64_t{config.n_kv_heads} * config.head_dim;
  OCTO_RETURN_IF_ERROR(KvRowCheck("cache-type-k", types.k, row));
  return KvRowCheck("cache-type-v", types.v, row);
}

uint64_t KvCache::bytes() const { return data_.size() + recurrent_.size() + checkpoint_.size(); }

absl::Status KvCache::AllocateRecurrent() {
  absl::StatusOr<BackendBuffer> zeros = backend_->Allocate((kSnapshotCopy + 1) * CopyFloats() * sizeof(float));
  if (!zeros.ok()) return zeros.status();
  recurrent_ = std::move(*zeros);
  current_ = 0;
  snapshot_pos_ = 0;
  checkpoint_pos_ = -1;
  return absl::OkStatus();
}

int KvCache::ReusablePrefix(int common) const {
  common = std::clamp(common, 0, size_);
  if (!recurrent()) return common;
  if (common == size_) return size_;
  int best = common >= snapshot_pos_ ? snapshot_pos_ : 0;
  if (checkpoint_pos_ <= common) best = std::max(best, checkpoint_pos_);
  return best;
}

absl::Status KvCache::ReserveCheckpoint() {
  if (!recurrent() || checkpoint_.size() != 0) return absl::OkStatus();
  OCTO_ASSIGN_OR_RETURN(checkpoint_, backend_->Allocate(CopyFloats() * sizeof(float)));
  return absl::OkStatus();
}

absl::Status KvCache::Checkpoint() {
  if (!recurrent() || recurrent_.size() == 0) return absl::OkStatus();
  OCTO_RETURN_IF_ERROR(ReserveCheckpoint());
  OCTO_RETURN_IF_ERROR(backend_->Copy(CopyBase(kCheckpointCopy), CopyBase(current_), CopyFloats() * sizeof(float)));
  checkpoint_pos_ = size_;
  return absl::OkStatus();
}

absl::Status KvCache::CheckpointLayer(int layer) {
  if (checkpoint_.size() == 0) return absl::FailedPreconditionError("CheckpointLayer before ReserveCheckpoint");
  const size_t at = static_cast<size_t>(delta_slot_[layer]) * (conv_floats_ + state_floats_);
  return backend_->Copy(CopyBase(kCheckpointCopy) + at, RecurrentAt(layer, /*next=*/true),
                        (conv_floats_ + state_floats_) * sizeof(float));
}

absl::Status KvCache::Snapshot() {
  if (!recurrent() || recurrent_.size() == 0) return absl::OkStatus();
  OCTO_RETURN_IF_ERROR(backend_->Copy(CopyBase(kSnapshotCopy), CopyBase(current_), CopyFloats() * sizeof(float)));
  snapshot_pos_ = size_;
  return absl::OkStatus();
}

int KvCache::CapacityFor(int positions) const {
  if (positions <= capacity_) return capacity_;
  int capacity = std::max(capacity_, 1);
  while (capacity < positions) capacity *= 2;
  return std::min(std::max(capacity, kKvGrowPositions), max_positions_);
}

uint64_t KvCache::BytesAfterReserve(int n) const {
  const int capacity = CapacityFor(std::min(size_ + std::max(n, 0), max_positions_));
  return PositionBytes() * capacity +
         (kSnapshotCopy + 1) * CopyFloats() * sizeof(float);
}

uint64_t KvCache::PositionsWithin(uint64_t budget) const {
  const uint64_t fixed = (kSnapshotCopy + 1) * CopyFloats() * sizeof(float);
  if (budget < fixed) return 0;
  return PositionBytes() == 0 ? UINT64_MAX : (budget - fixed) / PositionBytes();
}

absl::Status KvCache::Reserve(int n) {
  if (n < 0 || size_ + static_cast<int64_t>(n) > max_positions_) {
    return absl::ResourceExhaustedError(absl::StrCat("the sequence would hold ", size_ + static_cast<int64_t>(n),
                                                     " positions; its context limit is ", max_positions_));
  }
  if (recurrent() && recurrent_.size() == 0) OCTO_RETURN_IF_ERROR(AllocateRecurrent());
  if (size_ + n <= capacity_ || n_kv_layers_ == 0) return absl::OkStatus();
  const int new_capacity = CapacityFor(size_ + n);
  absl::StatusOr<BackendBuffer> grown = backend_->Allocate(PositionBytes() * new_capacity);
  if (!grown.ok()) return grown.status();
  for (int l = 0; l < n_kv_layers_ && size_ > 0; ++l) {
    // Layer l's keys, then its values, at the old and the new capacity.
    const size_t from = static_cast<size_t>(l) * capacity_ * (k_row_bytes_ + v_row_bytes_);
    const size_t to = static_cast<size_t>(l) * new_capacity * (k_row_bytes_ + v_row_bytes_);
    absl::Status copied = backend_->Copy(grown->as<uint8_t>() + to, data_.as<uint8_t>() + from, size_ * k_row_bytes_);
    if (copied.ok()) {
      copied = backend_->Copy(grown->as<uint8_t>() + to + new_capacity * k_row_bytes_,
                              data_.as<uint8_t>() + from + capacity_ * k_row_bytes_, size_ * v_row_bytes_);
    }
    if (!copied.ok()) return copied;
  }
  data_ = std::move(*grown);
  capacity_ = new_capacity;
  return absl::OkStatus();
}

absl::Status KvCache::Truncate(int n) {
  n = std::clamp(n, 0, size_);
  if (!recurrent() || n == size_) {
    size_ = n;
    return absl::OkStatus();
  }
  if (n == 0) {
    OCTO_RETURN_IF_ERROR(AllocateRecurrent());  // all zero: the empty sequence's state
  } else if (n == checkpoint_pos_) {
    OCTO_RETURN_IF_ERROR(backend_->Copy(CopyBase(current_), CopyBase(kCheckpointCopy), CopyFloats() * sizeof(float)));
  } else if (n == snapshot_pos_) {
    OCTO_RETURN_IF_ERROR(backend_->Copy(CopyBase(current_), CopyBase(kSnapshotCopy), CopyFloats() * sizeof(float)));
  } else {
    return absl::FailedPreconditionError(absl::StrCat("a hybrid model's recurrent state cannot be cut back to ", n,
                                                      " of ", size_, " positions (snapshot at ", snapshot_pos_,
                                                      ", checkpoint at ", checkpoint_pos_, ")"));
  }
  size_ = n;
  // A snapshot or checkpoint past the cut describes tokens that are gone.
  if (snapshot_pos_ > n) snapshot_pos_ = 0;
  if (checkpoint_pos_ > n) checkpoint_pos_ = -1;
  return absl::OkStatus();
}

absl::Status KvCache::KeepRows(int base, std::span<const int> slots) {
  if (recurrent()) {
    return absl::FailedPreconditionError("a hybrid model's cache cannot keep scattered rows (its drafts are linear)");
  }
  if (base < 0 || base > size_ || slots.size() > static_cast<size_t>(size_ - base)) {
    return absl::InvalidArgumentError(absl::StrCat("KeepRows: base ", base, " and ", slots.size(),
                                                   " rows do not fit the cache's ", size_, " positions"));
  }
  for (size_t j = 0; j < slots.size(); ++j) {
    const int lowest = j == 0 ? base : slots[j - 1] + 1;
    if (slots[j] < lowest || slots[j] >= size_) {
      return absl::InvalidArgumentError(absl::StrCat("KeepRows: slot ", slots[j], " (row ", j,
                                                     ") is not ascending within [", base, ", ", size_, ")"));
    }
  }
  // Ascending slots, each at or after its destination: no copy overwrites a
  // row still to be read.
  for (size_t j = 0; j < slots.size(); ++j) {
    const int to = base + static_cast<int>(j);
    if (slots[j] == to) continue;
    for (int l = 0; l < n_layers_; ++l) {
      if (kv_slot_[l] < 0) continue;
      const auto from = static_cast<size_t>(slots[j]);
      OCTO_RETURN_IF_ERROR(backend_->Copy(keys(l) + to * k_row_bytes_, keys(l) + from * k_row_bytes_, k_row_bytes_));
      OCTO_RETURN_IF_ERROR(backend_->Copy(values(l) + to * v_row_bytes_, values(l) + from * v_row_bytes_, v_row_bytes_));
    }
  }
  size_ = base + static_cast<int>(slots.size());
  return absl::OkStatus();
}

}  // namespace octo
