#include "daemon/core/loaded_model.h"

#include <algorithm>
#include <map>

#include "daemon/engine/model_files.h"
#include "daemon/grammar/think_first.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "storage/byte_size.h"
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
  s.pooling = PoolingName(c.pooling);
  s.generates = !IsEncoderArchitecture(c.architecture);
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
  const ModelChatTemplate chat = ChatTemplate::ForModel(jinja != nullptr ? jinja->string_value : std::string());
  s.chat_template = std::string(chat.chat_template.name());
  // The GGUF's own text, when it is the template octod chats in (not one
  // it fell back from).
  if (jinja != nullptr && chat.fallback_notice.empty()) s.chat_template_text = jinja->string_value;
  if (jinja != nullptr) {
    s.thinks = absl::StrContains(jinja->string_value, kThinkOpen);
    s.template_tools = absl::StrContains(jinja->string_value, "tools");
  }
  const GgufValue* tokens = manifest.FindTokenizerKey("tokenizer.ggml.tokens");
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"}) {
    const GgufValue* id = manifest.FindTokenizerKey(key);
    if (id == nullptr || tokens == nullptr) continue;
    absl::StatusOr<uint64_t> index = id->AsUint64();
    if (!index.ok() || *index >= tokens->strings.size()) continue;
    const std::string& text = tokens->strings[*index];
    if (std::find(s.stop.begin(), s.stop.end(), text) == s.stop.end()) s.stop.push_back(text);
  }
  return s;
}

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadedModel::Load(const ModelLoadOptions& options) {
  std::unique_ptr<LoadedModel> m(new LoadedModel());
  OCTO_ASSIGN_OR_RETURN(m->manifest_, ReadManifest(options.dir));
  OCTO_RETURN_IF_ERROR(KvCache::CheckTypes(m->manifest_.config, options.kv_types));
  m->kv_types_ = options.kv_types;
  OCTO_ASSIGN_OR_RETURN(m->tokenizer_, Tokenizer::FromMetadata(m->manifest_.tokenizer));
  const GgufValue* jinja = m->manifest_.FindTokenizerKey("tokenizer.chat_template");
  m->chat_template_ = ChatTemplate::ForModel(jinja != nullptr ? jinja->string_value : std::string());
  m->summary_ = SummarizeManifest(m->manifest_, options.path);
  m->summary_.loaded = true;
  OCTO_ASSIGN_OR_RETURN(m->globals_, ResidentGlobals::Load(options.dir, m->manifest_));
  OCTO_ASSIGN_OR_RETURN(m->backend_, CreateBackend(BackendChoice{.kind = options.backend,
                                                                 .gpu = options.gpu,
                                                                 .n_threads = options.n_threads,
                                                                 .allow_simd = options.allow_simd,
                                                                 .cuda_graphs = options.vram.cuda_graphs}));
  m->dir_ = options.dir;
  m->vram_ = options.vram;
  m->vram_.pin_first = options.residency.pin_first;
  m->vram_.pin_last = options.residency.pin_last;
  LayerPlan vram;
  if (m->backend_->kind() != "cpu") {
    OCTO_ASSIGN_OR_RETURN(vram, m->PlanVramTier(m->vram_, &m->vram_budget_));
  }
  LayerStreamOptions stream = options.stream;
  stream.model_dir = options.dir;
  OCTO_ASSIGN_OR_RETURN(m->residency_,
                        ResidencyManager::Create(m->manifest_, options.residency, stream, options.stream_factory,
                                                 vram.resident, options.selective_experts));
  OCTO_ASSIGN_OR_RETURN(m->weights_, BackendWeights::Create(*m->backend_, m->manifest_, options.dir,
                                                            m->globals_.weights(), *m->residency_,
                                                            *m->residency_, vram));
  return m;
}

absl::StatusOr<LayerPlan> LoadedModel::PlanVramTier(const VramSettings& v, uint64_t* budget_out) const {
  OCTO_ASSIGN_OR_RETURN(const std::vector<uint64_t> layer_bytes, LayerFileSizes(manifest_));
  uint64_t budget = v.budget_bytes;
  if (v.auto_budget) {
    // Free VRAM now, less what the device will also need: the sessions'
    // caches (the KV budget), the model's own tensors, the activations and
    // scratch of a pass (estimated generously) and the named reserve.
    const DeviceTierStats now = weights_ != nullptr ? weights_->DeviceStats() : DeviceTierStats{};
    uint64_t free = now.free_bytes + now.held_bytes;  // what this model's layers hold is free to re-plan
    if (weights_ == nullptr) {
      const DeviceMemory memory = QueryDeviceMemory();
      free = memory.free_bytes;
    }
    const ModelConfig& c = manifest_.config;
    const uint64_t globals = globals_.bytes();
    const uint64_t workspace = WorkspaceEstimate(c, v.pass_rows);
    const uint64_t reserved = v.kv_budget_bytes + globals + workspace + kVramReserveBytes;
    if (free <= reserved) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the auto VRAM budget is empty: ", free, " bytes free on the device, ", reserved,
          " needed beside the layers (KV budget ", v.kv_budget_bytes, ", model tensors ", globals, ", workspaces ",
          workspace, ", reserve ", kVramReserveBytes, ")"));
    }
    budget = free - reserved;
  }
  *budget_out = budget;
  return PlanVram(layer_bytes, VramPlanSettings{.budget_bytes = budget,
                                                .staging_buffers = v.staging_buffers,
                                                .pin_first = v.pin_first,
                                                .pin_last = v.pin_last});
}

absl::Status LoadedModel::ApplyResidency(const ResidencySettings& host, const VramSettings& vram_in) {
  if (!weights_->on_device()) return residency_->Apply(host);
  VramSettings vram = vram_in;
  vram.pin_first = host.pin_first;
  vram.pin_last = host.pin_last;
  uint64_t budget = 0;
  OCTO_ASSIGN_OR_RETURN(const LayerPlan plan, PlanVramTier(vram, &budget));
  OCTO_RETURN_IF_ERROR(weights_->Drain());
  std::vector<bool> old_device(manifest_.config.n_layers, false);
  for (uint32_t l = 0; l < old_device.size(); ++l) old_device[l] = residency_->on_device(l);
  residency_->SetDeviceLayers(plan.resident);
  absl::Status host_status = residency_->Apply(host);
  if (!host_status.ok()) {
    residency_->SetDeviceLayers(old_device);
    return host_status;
  }
  OCTO_RETURN_IF_ERROR(weights_->Apply(plan));
  vram_ = vram;
  vram_budget_ = budget;
  return absl::OkStatus();
}

uint64_t LoadedModel::device_held_bytes() const {
  return weights_->on_device() ? weights_->DeviceStats().held_bytes : 0;
}

std::string LoadedModel::PinNotice() const {
  if (!weights_->on_device()) return "";
  const DeviceTierStats s = weights_->DeviceStats();
  if (s.unpinned_bytes == 0) return "";
  return absl::StrCat(FormatByteSize(s.unpinned_bytes), " of host layer memory could not be pinned (cudaHostRegister: ",
                      s.pin_error, "); those layers are copied to the device as pageable memory, slower. Raise the "
                      "memlock limit (ulimit -l, LimitMEMLOCK= in systemd) or give octod's host tier less");
}

void LoadedModel::AddDeviceReport(ResidencyReport& report, std::vector<LayerReport>& layers) {
  if (!weights_->on_device()) return;
  const DeviceTierStats s = weights_->DeviceStats();
  DeviceReport& d = report.device;
  d.present = true;
  d.name = backend_->Describe();
  d.total_bytes = s.total_bytes;
  d.free_bytes = s.free_bytes;
  d.auto_budget = vram_.auto_budget;
  d.budget_bytes = vram_budget_;
  d.workspace_bytes = WorkspaceEstimate(manifest_.config, vram_.pass_rows);
  d.held_bytes = s.held_bytes;
  d.peak_bytes = s.peak_bytes;
  d.device_layers = s.vram_layers;
  d.staging_buffers = s.staging_buffers;
  d.staging_bytes = s.staging_bytes;
  d.global_bytes = s.global_bytes;
  d.copied_bytes = s.copied_bytes;
  d.copy_seconds = s.copy_seconds;
  d.timing_every = s.timing_every;
  d.unpinned_bytes = s.unpinned_bytes;
  d.pin_error = s.pin_error;
  d.graph_captures = s.graph_captures;
  d.graph_replays = s.graph_replays;
  d.eager_stretches = s.eager_stretches;
  d.programmatic_launches = s.programmatic_launches;
  d.weight_prefetch_bytes = s.weight_prefetch_bytes;
  // Rates and averages from the timed uses (one in timing_every).
  d.h2d_gbps = s.copy_seconds > 0 ? s.timed_copied_bytes / s.copy_seconds / 1e9 : 0;
  d.overlap = s.copy_seconds > 0 ? std::clamp(1.0 - s.wait_seconds / s.copy_seconds, 0.0, 1.0) : 0;
  for (size_t l = 0; l < layers.size() && l < s.copies.size(); ++l) {
    LayerReport& r = layers[l];
    r.copies = s.copies[l];
    if (s.timed_copies[l] > 0) r.copy_seconds = s.copy_seconds_by_layer[l] / s.timed_copies[l];
    if (s.timed_passes[l] > 0) {
      r.copy_wait_seconds = s.wait_seconds_by_layer[l] / s.timed_passes[l];
      r.compute_seconds = s.compute_seconds_by_layer[l] / s.timed_passes[l];  // from events: the device's time
    }
  }
}

std::string LoadedModel::TakeChatTemplateNotice() {
  if (chat_template_->fallback_notice.empty() || chat_template_notice_taken_.exchange(true)) return std::string();
  return chat_template_->fallback_notice;
}

std::shared_ptr<const GrammarVocab> LoadedModel::grammar_vocab() const {
  std::call_once(grammar_vocab_once_, [this] { grammar_vocab_ = NewGrammarVocab(*tokenizer_); });
  return grammar_vocab_;
}

std::string LoadedModel::backend() const {
  return backend_->Describe();
}

std::unique_ptr<KvCache> LoadedModel::NewCache(int max_positions) const {
  const int limit = static_cast<int>(std::min<uint32_t>(config().context_length, 1u << 30));
  return std::make_unique<KvCache>(config(), std::min(max_positions, limit), backend_, kv_types_);
}

absl::Status LoadedModel::Forward(std::span<const SequenceStep> batch, std::vector<float>& logits,
                              std::vector<float>* hidden, std::vector<LogitCandidates>* candidates) {
  const ModelView view{.config = &manifest_.config, .token_embd = &globals_.weights().token_embd,
                       .globals = &weights_->globals(), .layers = &weights_->layers()};
  return ForwardModel(view, batch, state_, *backend_, logits, hidden, candidates);
}

}  // namespace octo
