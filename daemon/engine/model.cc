#include "daemon/engine/model.h"

#include <algorithm>

#include "daemon/engine/model_files.h"
#include "storage/status_macros.h"

namespace octo {

absl::StatusOr<std::unique_ptr<Model>> Model::Open(const std::string& dir, const ModelOptions& options) {
  std::unique_ptr<Model> model(new Model());
  OCTO_ASSIGN_OR_RETURN(model->store_, WeightStore::Open(dir, options.weights));
  OCTO_RETURN_IF_ERROR(KvCache::CheckTypes(model->store_->config(), options.kv_types));
  model->kv_types_ = options.kv_types;
  OCTO_ASSIGN_OR_RETURN(model->backend_, CreateBackend(BackendChoice{.kind = options.backend,
                                                                     .gpu = options.gpu,
                                                                     .n_threads = options.n_threads,
                                                                     .allow_simd = options.allow_simd,
                                                                     .cuda_graphs = options.cuda_graphs}));
  LayerPlan vram;
  if (model->backend_->kind() != "cpu") {
    OCTO_ASSIGN_OR_RETURN(const std::vector<uint64_t> layer_bytes, LayerFileSizes(model->store_->manifest()));
    OCTO_ASSIGN_OR_RETURN(vram, PlanVram(layer_bytes, VramPlanSettings{.budget_bytes = options.vram_budget_bytes,
                                                                       .staging_buffers = options.staging_buffers,
                                                                       .pin_first = options.vram_pin_first,
                                                                       .pin_last = options.vram_pin_last}));
  }
  OCTO_ASSIGN_OR_RETURN(model->weights_,
                        BackendWeights::Create(*model->backend_, model->store_->manifest(), dir,
                                               model->store_->globals(), *model->store_, *model->store_, vram));
  return model;
}

const cpu::Exec& Model::exec() const {
  static const cpu::Exec kNone;
  const auto* cpu = dynamic_cast<const CpuBackend*>(backend_.get());
  return cpu != nullptr ? cpu->exec() : kNone;
}

std::unique_ptr<KvCache> Model::NewCache(int max_positions) const {
  const int limit = static_cast<int>(std::min<uint32_t>(config().context_length, 1u << 30));
  return std::make_unique<KvCache>(config(), std::min(max_positions, limit), backend_, kv_types_);
}

absl::Status Model::Forward(std::span<const SequenceStep> batch, std::vector<float>& logits,
                              std::vector<float>* hidden, std::vector<LogitCandidates>* candidates) {
  const ModelView view{.config = &store_->config(), .token_embd = &store_->globals().token_embd,
                       .globals = &weights_->globals(), .layers = &weights_->layers()};
  return ForwardModel(view, batch, state_, *backend_, logits, hidden, candidates);
}

}  // namespace octo
