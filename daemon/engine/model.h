// Model: a loaded layer directory ready to run on the CPU backend -- its
// weights (WeightStore), the thread pool and the activations of the pass.
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
#include "daemon/engine/cpu_backend.h"
#include "daemon/engine/forward.h"
#include "daemon/engine/kv_cache.h"
#include "daemon/engine/weight_store.h"
#include "kernels/ops.h"

namespace octo {

struct ModelOptions {
  WeightStoreOptions weights;
  int n_threads = 0;          // < 1: one per core
  bool allow_simd = true;     // false: the portable kernels even on an AVX2 CPU
};

class Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Open(const std::string& dir, const ModelOptions& options);

  const ModelConfig& config() const { return store_->config(); }
  const Manifest& manifest() const { return store_->manifest(); }
  const WeightStore& store() const { return *store_; }
  const cpu::Exec& exec() const { return cpu_->exec(); }

  // A cache for a new sequence of at most max_positions positions (capped
  // at the model's context length).
  std::unique_ptr<KvCache> NewCache(int max_positions) const;

  // One pass over `batch`; see ForwardLlama (forward.h) for the contract.
  absl::Status Forward(std::span<const SequenceStep> batch, std::vector<float>& logits);

 private:
  Model() = default;
  std::unique_ptr<WeightStore> store_;
  std::shared_ptr<CpuBackend> cpu_;
  RunState state_;
};

}  // namespace octo
