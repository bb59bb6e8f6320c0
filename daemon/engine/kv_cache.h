// KvCache: the keys and values one sequence (session) has computed so far.
//
// Layout, per layer: keys (capacity, n_kv_heads * head_dim) then values of
// the same shape, row p holding position p, each in the cache's type
// (kernels/kv_types.h): fp16 bit patterns by default, or GGUF Q8_0, Q4_0 or
// Q4_1 blocks (--cache-type-k, --cache-type-v), keys and values each their
// own. Why:
//  - fp16 halves the memory of fp32 and is what llama.cpp stores by default,
//    so our attention rounds as its does (kernels/ops.h, Attention); Q8_0
//    halves it again and Q4_0 about quarters it, for longer contexts in the
//    same memory. KvAppend encodes each new row as it is written and
//    Attention decodes the rows it reads, so nothing converts the cache;
//  - one contiguous block per layer and kind lets the attention kernel read
//    a head's keys with a fixed stride and lets a sequence's cache be copied
//    or dropped in one piece;
//  - capacity grows in steps of kKvGrowPositions (copying), so a short chat
//    does not reserve the whole context.
// Hybrid models (qwen3next, qwen35) keep keys and values for their attention
// layers only. Their DeltaNet layers keep a fixed-size recurrent state
// instead: the conv's last kernel - 1 inputs and each value head's state
// matrix, in float. It is double-buffered (a pass reads the committed copy
// and writes the other, so a failed pass leaves the sequence as it was) and
// has a third copy, the snapshot of a turn boundary (Snapshot): recurrent
// state cannot be cut back to a shorter prefix, so a later request can
// reuse exactly size(), the snapshot's position, or nothing. Speculative
// decoding adds a fourth, the checkpoint (allocated on first use): the state
// part way through a verification step, or between draft steps, so that
// rejected draft tokens can be rolled back out of the state.
// Encoders (bert, nomic-bert) keep one layer's rows, which every layer
// overwrites in turn: a sequence runs whole in one pass, and a layer's
// attention reads only the rows it wrote.
// The rows live in backend memory (kernels' memory: the device's for CUDA),
// where the attention kernels read them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "daemon/engine/backend.h"
#include "kernels/kv_types.h"
#include "storage/model_config.h"

namespace octo {

inline constexpr int kKvGrowPositions = 256;

class KvCache {
 public:
  // max_positions: the most positions this sequence may hold (the context
  // limit the caller grants it), <= config.context_length is not required.
  // The memory comes from `backend`, which the cache keeps alive.
  // types: the keys' and values' encodings, checked by the caller against
  // the rows (KvRowCheck).
  KvCache(const ModelConfig& config, int max_positions, std::shared_ptr<Backend> backend, KvCacheTypes types = {});

  // OK when the model's rows (n_kv_heads * head_dim values) can be stored
  // as `types`; else INVALID_ARGUMENT naming cache-type-k or cache-type-v.
  static absl::Status CheckTypes(const ModelConfig& config, KvCacheTypes types);

  int size() const { return size_; }            // positions filled
  int capacity() const { return capacity_; }    // positions allocated
  int max_positions() const { return max_positions_; }
  int row_elements() const { return row_elements_; }  // n_kv_heads * head_dim
  KvCacheTypes types() const { return types_; }
  uint64_t bytes() const;                        // memory held now
  // Key and value bytes of one position over every attention layer.
  uint64_t PositionBytes() const { return static_cast<uint64_t>(n_kv_layers_) * (k_row_bytes_ + v_row_bytes_); }

  // Makes room for `n` more positions. RESOURCE_EXHAUSTED naming the limit
  // when size() + n > max_positions(), or when the backend's memory runs
  // out; nothing changes then.
  absl::Status Reserve(int n);
  // bytes() after Reserve(n) succeeds (the cache grows in steps).
  uint64_t BytesAfterReserve(int n) const;
  // The most positions a cache of this model can hold, full, in `budget`
  // bytes: a cache of n positions at most takes PositionBytes() * n plus
  // its fixed recurrent state (a hybrid's). UINT64_MAX when positions cost
  // nothing (no attention layers) and the state fits.
  uint64_t PositionsWithin(uint64_t budget) const;

  // Rows of layer `layer`: (capacity, row_elements) in types().k and .v.
  uint8_t* keys(int layer) { return data_.as<uint8_t>() + LayerOffset(layer); }
  uint8_t* values(int layer) { return keys(layer) + static_cast<size_t>(capacity_) * k_row_bytes_; }
  const uint8_t* keys(int layer) const { return data_.as<uint8_t>() + LayerOffset(layer); }
  const uint8_t* values(int layer) const { return keys(layer) + static_cast<size_t>(capacity_) * k_row_bytes_; }

  // The forward pass wrote rows [size, size + n) of every layer (and the
  // next recurrent state): count them. checkpoint_rows > 0: the pass also
  // saved the recurrent state after the first checkpoint_rows of them
  // (CheckpointLayer), which becomes the checkpoint of that position.
  void Commit(int n, int checkpoint_rows = 0) {
    if (checkpoint_rows > 0) checkpoint_pos_ = size_ + checkpoint_rows;
    size_ += n;
    current_ ^= 1;
  }
  // The longest prefix of the first `common` positions that Truncate can
  // keep: all of them, or for a hybrid model size() when common reaches it,
  // else the latest of the checkpoint's and the snapshot's positions that
  // common reaches, else 0.
  int ReusablePrefix(int common) const;
  // Forgets positions >= n (n <= size()), e.g. to re-run from a shared
  // prefix or to drop rejected draft tokens; for a hybrid model n must be a
  // ReusablePrefix (FAILED_PRECONDITION otherwise). RESOURCE_EXHAUSTED when
  // resetting the recurrent state to empty finds no memory.
  absl::Status Truncate(int n);
  // Keeps the rows at `slots` (ascending, each in [base, size())) as the
  // positions base, base + 1, ... of every layer, then forgets the rest:
  // the accepted path of a draft tree, whose rows a tree step wrote at
  // scattered slots, moved into place. INVALID_ARGUMENT for bad slots;
  // FAILED_PRECONDITION for a hybrid model (its drafts are linear).
  absl::Status KeepRows(int base, std::span<const int> slots);

  // Hybrid models: DeltaNet layer `layer`'s conv inputs (kernel - 1 rows of
  // conv channels, oldest first) and its state ((v_heads, head_dim,
  // head_dim), S[h][key i][value j]): the committed copy, or with next the
  // one the pass writes.
  bool recurrent() const { return n_delta_layers_ > 0; }
  float* conv_state(int layer, bool next) { return RecurrentAt(layer, next); }
  float* delta_state(int layer, bool next) { return RecurrentAt(layer, next) + conv_floats_; }
  // Keeps the committed recurrent state as the snapshot of position size()
  // (the end of a request's prompt: a turn boundary).
  absl::Status Snapshot();
  int snapshot_position() const { return snapshot_pos_; }
  // Speculative decoding's rollback point: Checkpoint keeps the committed
  // recurrent state as the checkpoint of position size() (between steps);
  // a step with checkpoint rows saves each DeltaNet layer's state part way
  // through with CheckpointLayer, after ReserveCheckpoint. -1: none.
  absl::Status ReserveCheckpoint();
  absl::Status Checkpoint();
  absl::Status CheckpointLayer(int layer);  // the state the pass is writing (next)
  int checkpoint_position() const { return checkpoint_pos_; }
  // What ReserveCheckpoint would add to bytes().
  uint64_t CheckpointBytes() const {
    return recurrent() && checkpoint_.size() == 0 ? CopyFloats() * sizeof(float) : 0;
  }

 private:
  int CapacityFor(int positions) const;  // the capacity Reserve grows to
  size_t LayerOffset(int layer) const {
    return static_cast<size_t>(kv_slot_[layer]) * capacity_ * (k_row_bytes_ + v_row_bytes_);
  }
  // The recurrent buffer holds three copies of every DeltaNet layer's conv
  // inputs and state: 0 and 1, the double buffer; kSnapshotCopy.
  // The checkpoint is a fourth copy in a buffer of its own, allocated only
  // when speculative decoding first needs it.
  static constexpr int kSnapshotCopy = 2;
  static constexpr int kCheckpointCopy = 3;
  size_t CopyFloats() const { return static_cast<size_t>(n_delta_layers_) * (conv_floats_ + state_floats_); }
  float* CopyBase(int copy) {
    if (copy == kCheckpointCopy) return checkpoint_.as<float>();
    return recurrent_.as<float>() + static_cast<size_t>(copy) * CopyFloats();
  }
  float* RecurrentAt(int layer, bool next) {
    return CopyBase(current_ ^ (next ? 1 : 0)) + static_cast<size_t>(delta_slot_[layer]) * (conv_floats_ + state_floats_);
  }
  absl::Status AllocateRecurrent();

  std::vector<int> kv_slot_;     // per layer: its index among the attention layers, or -1
  std::vector<int> delta_slot_;  // per layer: its index among the DeltaNet layers, or -1
  int n_kv_layers_ = 0;
  int n_delta_layers_ = 0;
  size_t conv_floats_ = 0, state_floats_ = 0;
  BackendBuffer recurrent_;        // kSnapshotCopy + 1 copies, allocated at the first Reserve
  int current_ = 0;                // which copy is committed
  int snapshot_pos_ = 0;           // the snapshot copy's position (all zero: 0)
  BackendBuffer checkpoint_;       // kCheckpointCopy
  int checkpoint_pos_ = -1;        // its position; -1: none (or stale)
  int n_layers_ = 0;
  int row_elements_ = 0;
  KvCacheTypes types_;
  size_t k_row_bytes_ = 0, v_row_bytes_ = 0;
  int max_positions_ = 0;
  int capacity_ = 0;
  int size_ = 0;
  std::shared_ptr<Backend> backend_;
  BackendBuffer data_;  // per attention layer: keys (capacity, k_row_bytes), values (capacity, v_row_bytes)
};

}  // namespace octo
