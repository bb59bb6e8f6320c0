#include "daemon/core/loaded_model.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "storage/llama_file_type.h"
#include "storage/status_macros.h"

namespace octo {

ModelSummary SummarizeManifest(const Manifest& manifest, const std::string& path) {
  const ModelConfig& c = manifest.config;
  ModelSummary s;
  s.path = path;
  s.architecture = c.architecture;
  s.name = path;
  for (const auto& [key, value] : manifest.metadata) {
    if (key == "general.name" && !value.string_value.empty()) s.name = value.string_value;
  }
  s.n_layers = c.n_layers;
  s.dim = c.dim;
  s.vocab_size = c.vocab_size;
  s.context_length = c.context_length;
  s.n_experts = c.n_experts;
  std::map<std::string, uint64_t> matrix_bytes;  // by ggml type name
  for (const ManifestFile& f : manifest.files) {
    s.total_bytes += f.size;
    for (const ManifestTensor& t : f.tensors) {
      uint64_t elements = 1;
      for (uint64_t d : t.shape) elements *= d;
      s.n_params += elements;
      if (t.shape.size() >= 2) matrix_bytes[std::string(t.type.name)] += t.bytes;
    }
  }
  for (const auto& [key, value] : manifest.metadata) {
    if (key != "general.file_type") continue;
    if (absl::StatusOr<uint64_t> type = value.AsUint64(); type.ok()) s.quantization = LlamaFileTypeName(*type);
  }
  if (s.quantization.empty() && !matrix_bytes.empty()) {
    s.quantization = std::max_element(matrix_bytes.begin(), matrix_bytes.end(), [](const auto& a, const auto& b) {
                       return a.second < b.second;
                     })->first;
  }
  const GgufValue* jinja = manifest.FindTokenizerKey("tokenizer.chat_template");
  if (jinja != nullptr) {
    absl::StatusOr<ChatTemplate> t = ChatTemplate::Detect(jinja->string_value);
    if (t.ok()) s.chat_template = std::string(t->name());
  }
  return s;
}

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadedModel::Load(const ModelLoadOptions& options) {
  std::unique_ptr<LoadedModel> m(new LoadedModel());
  OCTO_ASSIGN_OR_RETURN(m->manifest_, ReadManifest(options.dir));
  OCTO_ASSIGN_OR_RETURN(m->tokenizer_, Tokenizer::FromMetadata(m->manifest_.tokenizer));
  const GgufValue* jinja = m->manifest_.FindTokenizerKey("tokenizer.chat_template");
  m->chat_template_ = ChatTemplate::Detect(jinja != nullptr ? jinja->string_value : std::string());
  m->summary_ = SummarizeManifest(m->manifest_, options.path);
  m->summary_.loaded = true;
  OCTO_ASSIGN_OR_RETURN(m->globals_, ResidentGlobals::Load(options.dir, m->manifest_));
  LayerStreamOptions stream = options.stream;
  stream.model_dir = options.dir;
  OCTO_ASSIGN_OR_RETURN(m->residency_,
                        ResidencyManager::Create(m->manifest_, options.residency, stream, options.stream_factory));
  m->backend_ = std::make_shared<CpuBackend>(options.n_threads, options.allow_simd);
  return m;
}

std::string LoadedModel::backend() const {
  return backend_->Describe();
}

std::unique_ptr<KvCache> LoadedModel::NewCache(int max_positions) const {
  const int limit = static_cast<int>(std::min<uint32_t>(config().context_length, 1u << 30));
  return std::make_unique<KvCache>(config(), std::min(max_positions, limit), backend_);
}

absl::Status LoadedModel::Forward(std::span<const SequenceStep> batch, std::vector<float>& logits) {
  const ModelView view{.config = &manifest_.config, .token_embd = &globals_.weights().token_embd,
                       .globals = &globals_.weights(), .layers = residency_.get()};
  return ForwardLlama(view, batch, state_, *backend_, logits);
}

}  // namespace octo
