// Model: a loaded layer directory ready to run, on the CPU backend or a
// CUDA device -- its weights (WeightStore on the host; on CUDA also the
// VRAM tier and staging buffers), the backend and the activations of the
// pass.
//
// This is what the rest of the daemon holds: sessions own KvCaches made by
// NewCache, the scheduler calls Forward with the next step of each.
//
// Threading: Forward runs one pass at a time (the caller serializes); the
// pass itself uses every thread of the pool.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/engine/backend_setup.h"
#include "daemon/engine/cpu_backend.h"
#include "daemon/engine/forward.h"
#include "daemon/engine/kv_cache.h"
#include "daemon/engine/weight_store.h"
#include "kernels/ops.h"

namespace octo {

struct ModelOptions {
  WeightStoreOptions weights;  // the host: resident layers, the rest read per pass
  int n_threads = 0;          // < 1: one per core
  bool allow_simd = true;     // false: the portable kernels even on an AVX2 CPU
  std::string backend = "cpu";  // cpu | cuda | auto (backend_setup.h)
  int gpu = 0;
  // CUDA: layers kept in VRAM plus the staging buffers, and how many
  // staging buffers the other layers are copied through.
  uint64_t vram_budget_bytes = kUnlimitedBudget;
  uint32_t staging_buffers = kDefaultStagingBuffers;
  uint32_t vram_pin_first = 1, vram_pin_last = 1;  // always in VRAM (if the budget allows)
  KvCacheTypes kv_types = {};  // every cache NewCache makes; Open checks the model's rows fit them
  bool cuda_graphs = true;     // CUDA: decode passes replayed as CUDA graphs
};

class Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Open(const std::string& dir, const ModelOptions& options);

  const ModelConfig& config() const { return store_->config(); }
  const Manifest& manifest() const { return store_->manifest(); }
  const WeightStore& store() const { return *store_; }
  // The CPU backend's pool and SIMD level (a default Exec on CUDA).
  const cpu::Exec& exec() const;
  Backend& backend() { return *backend_; }
  BackendWeights& weights() { return *weights_; }

  // A cache for a new sequence of at most max_positions positions (capped
  // at the model's context length).
  std::unique_ptr<KvCache> NewCache(int max_positions) const;
  KvCacheTypes kv_types() const { return kv_types_; }

  // One pass over `batch`; see ForwardLlama (forward.h) for the contract.
  absl::Status Forward(std::span<const SequenceStep> batch, std::vector<float>& logits,
                       std::vector<float>* hidden = nullptr, std::vector<LogitCandidates>* candidates = nullptr);

 private:
  Model() = default;
  std::unique_ptr<WeightStore> store_;
  std::shared_ptr<Backend> backend_;
  std::unique_ptr<BackendWeights> weights_;
  RunState state_;
  KvCacheTypes kv_types_;
};

}  // namespace octo
