#include "daemon/engine/model.h"

#include <algorithm>

#include "kernels/cpu/simd.h"
#include "storage/status_macros.h"

namespace octo {

absl::StatusOr<std::unique_ptr<Model>> Model::Open(const std::string& dir, const ModelOptions& options) {
  std::unique_ptr<Model> model(new Model());
  OCTO_ASSIGN_OR_RETURN(model->store_, WeightStore::Open(dir, options.weights));
  model->pool_ = std::make_unique<cpu::ThreadPool>(options.n_threads);
  model->exec_.pool = model->pool_.get();
  model->exec_.simd = options.allow_simd ? cpu::DetectSimd() : cpu::Simd::kPortable;
  return model;
}

std::unique_ptr<KvCache> Model::NewCache(int max_positions) const {
  const int limit = static_cast<int>(std::min<uint32_t>(config().context_length, 1u << 30));
  return std::make_unique<KvCache>(config(), std::min(max_positions, limit));
}

absl::Status Model::Forward(std::span<const SequenceStep> batch, std::vector<float>& logits) {
  const ModelView view{.config = &store_->config(), .globals = &store_->globals(), .layers = store_.get()};
  return ForwardLlama(view, batch, state_, exec_, logits);
}

}  // namespace octo
