#include "daemon/engine/model.h"

#include <algorithm>

#include "storage/status_macros.h"

namespace octo {

absl::StatusOr<std::unique_ptr<Model>> Model::Open(const std::string& dir, const ModelOptions& options) {
  std::unique_ptr<Model> model(new Model());
  OCTO_ASSIGN_OR_RETURN(model->store_, WeightStore::Open(dir, options.weights));
  model->cpu_ = std::make_shared<CpuBackend>(options.n_threads, options.allow_simd);
  return model;
}

std::unique_ptr<KvCache> Model::NewCache(int max_positions) const {
  const int limit = static_cast<int>(std::min<uint32_t>(config().context_length, 1u << 30));
  return std::make_unique<KvCache>(config(), std::min(max_positions, limit), cpu_);
}

absl::Status Model::Forward(std::span<const SequenceStep> batch, std::vector<float>& logits) {
  const ModelView view{.config = &store_->config(), .token_embd = &store_->globals().token_embd,
                       .globals = &store_->globals(), .layers = store_.get()};
  return ForwardLlama(view, batch, state_, *cpu_, logits);
}

}  // namespace octo
