// KvCache: the keys and values one sequence (session) has computed so far.
//
// Layout, per layer: keys (capacity, n_kv_heads * head_dim) then values of
// the same shape, both fp16 bit patterns (kernels/half.h), row p holding
// position p. Why:
//  - fp16 halves the memory of fp32 and is what llama.cpp stores by default,
//    so our attention rounds as its does (kernels/ops.h, Attention);
//  - one contiguous block per layer and kind lets the attention kernel read
//    a head's keys with a fixed stride and lets a sequence's cache be copied
//    or dropped in one piece;
//  - capacity grows in steps of kKvGrowPositions (copying), so a short chat
//    does not reserve the whole context.
// The rows live in backend memory (kernels' memory: the device's for CUDA),
// where the attention kernels read them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "daemon/engine/backend.h"
#include "storage/model_config.h"

namespace octo {

inline constexpr int kKvGrowPositions = 256;

class KvCache {
 public:
  // max_positions: the most positions this sequence may hold (the context
  // limit the caller grants it), <= config.context_length is not required.
  // The memory comes from `backend`, which the cache keeps alive.
  KvCache(const ModelConfig& config, int max_positions, std::shared_ptr<Backend> backend);

  int size() const { return size_; }            // positions filled
  int capacity() const { return capacity_; }    // positions allocated
  int max_positions() const { return max_positions_; }
  int row_elements() const { return row_elements_; }  // n_kv_heads * head_dim
  uint64_t bytes() const;                        // memory held now

  // Makes room for `n` more positions. RESOURCE_EXHAUSTED naming the limit
  // when size() + n > max_positions(), or when the backend's memory runs
  // out; nothing changes then.
  absl::Status Reserve(int n);
  // bytes() after Reserve(n) succeeds (the cache grows in steps).
  uint64_t BytesAfterReserve(int n) const;

  // Rows of layer `layer`: (capacity, row_elements).
  uint16_t* keys(int layer) { return data_.as<uint16_t>() + LayerOffset(layer); }
  uint16_t* values(int layer) { return keys(layer) + static_cast<size_t>(capacity_) * row_elements_; }
  const uint16_t* keys(int layer) const { return data_.as<uint16_t>() + LayerOffset(layer); }
  const uint16_t* values(int layer) const { return keys(layer) + static_cast<size_t>(capacity_) * row_elements_; }

  // The forward pass wrote rows [size, size + n) of every layer: count them.
  void Commit(int n) { size_ += n; }
  // Forgets positions >= n (n <= size()), e.g. to re-run from a shared prefix.
  void Truncate(int n);

 private:
  int CapacityFor(int positions) const;  // the capacity Reserve grows to
  size_t LayerOffset(int layer) const { return static_cast<size_t>(layer) * 2 * capacity_ * row_elements_; }

  int n_layers_ = 0;
  int row_elements_ = 0;
  int max_positions_ = 0;
  int capacity_ = 0;
  int size_ = 0;
  std::shared_ptr<Backend> backend_;
  BackendBuffer data_;  // (n_layers, 2, capacity, row_elements)
};

}  // namespace octo
