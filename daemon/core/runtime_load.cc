// Loading models: a name resolved under the models root, a GGUF decomposed
// into the cache first (while the loaded models still serve), room made
// (runtime_models.cc), and a load that fails leaves what it unloaded loaded
// again.
#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/core/model_paths.h"
#include "daemon/core/runtime_impl.h"
#include "storage/byte_size.h"
#include "storage/gguf_cache.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

// How often a decomposition in progress is logged.
constexpr double kProgressLogSeconds = 10;

// The KV cache types beside the model's heads: a quantized type whose
// 32-value blocks span several heads (head_dim under 32) shares one scale
// among them, which costs far more than on wide heads (stories260K's 8-value
// heads: +226% perplexity at q4_0 keys, +0.3% at q8_0).
std::string KvTypesNotice(const ModelConfig& config, KvCacheTypes types) {
  if (types == KvCacheTypes{}) return "";
  std::string notice = absl::StrCat("KV cache k ", KvCacheTypeName(types.k), ", v ", KvCacheTypeName(types.v));
  for (GgmlType type : {types.k, types.v}) {
    if (type == GgmlType::kF16 || config.head_dim >= 32) continue;
    absl::StrAppend(&notice, "; its heads are ", config.head_dim, " values, so each 32-value ", KvCacheTypeName(type),
                    " block spans ", 32 / std::max(config.head_dim, 1u),
                    " heads and loses more than on wide heads (q8_0 loses least)");
    break;
  }
  return notice;
}

}  // namespace

void RuntimeImpl::Log(absl::string_view line) const {
  if (options_.log) options_.log(line);
}

std::string RuntimeImpl::CacheDir() const {
  return options_.cache_dir.empty() ? options_.models_root + "/.octo-cache" : options_.cache_dir;
}

void RuntimeImpl::SetLoading(const std::optional<LoadProgress>& loading) {
  std::lock_guard<std::mutex> lock(mu_);
  loading_ = loading;
}

absl::StatusOr<std::string> RuntimeImpl::ModelDir(const ResolvedModel& model) {
  if (!model.gguf) return model.path;
  const auto began = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count(); };
  double logged_at = 0;
  DecomposeOptions options;
  options.progress = [&](uint64_t done, uint64_t total) {
    SetLoading(LoadProgress{.model = model.name, .stage = "decomposing into the cache", .bytes_done = done,
                            .bytes_total = total, .seconds = seconds()});
    if (seconds() - logged_at >= kProgressLogSeconds || (done == total && logged_at > 0)) {
      logged_at = seconds();
      Log(absl::StrFormat("decomposing %s: %s of %s (%.0f%%)", model.name, FormatByteSize(done),
                          FormatByteSize(total), total > 0 ? 100.0 * done / total : 100.0));
    }
  };
  absl::StatusOr<CachedModel> cached = DecomposeIntoCache(model.path, CacheDir(), options);
  if (!cached.ok()) return cached.status();
  if (cached->reused) {
    Log(absl::StrCat(model.name, ": using its decomposed copy in ", cached->dir));
  } else {
    Log(absl::StrFormat("%s: decomposed into %s in %.1f s", model.name, cached->dir, seconds()));
  }
  return cached->dir;
}

absl::StatusOr<ModelSummary> RuntimeImpl::LoadModel(const std::string& name, const ModelSettings& settings) {
  absl::StatusOr<ResolvedModel> resolved = ResolveModelPath(options_.models_root, name);
  if (!resolved.ok()) {
    Log(absl::StrCat("load refused: ", resolved.status().message()));
    return resolved.status();
  }
  std::lock_guard<std::mutex> load(load_mu_);
  Log(absl::StrCat("loading ", resolved->name));
  SetLoading(LoadProgress{.model = resolved->name, .stage = "loading"});
  absl::StatusOr<ModelSummary> loaded = LoadResolved(*resolved, settings);
  SetLoading(std::nullopt);
  if (!loaded.ok()) Log(absl::StrCat("loading ", resolved->name, " failed: ", loaded.status().message()));
  return loaded;
}

absl::StatusOr<ModelSummary> RuntimeImpl::LoadResolved(const ResolvedModel& resolved, const ModelSettings& settings) {
  OCTO_ASSIGN_OR_RETURN(const std::string dir, ModelDir(resolved));
  const LoadedFrom from{.name = resolved.name,
                        .dir = dir,
                        .draft = settings.draft_model.value_or(options_.draft_model),
                        .kv_types = {settings.cache_type_k.value_or(options_.kv_types.k),
                                     settings.cache_type_v.value_or(options_.kv_types.v)}};
  // A model loads with the configured settings, narrowed to its share.
  ResidencySettings residency = configured_residency_;
  VramSettings vram = configured_vram_;
  std::vector<ModelSlot> evicted;  // what this load unloaded, to load again if it fails
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("octod is shutting down");
    if (auto it = models_.find(resolved.name); it != models_.end()) {
      // Loaded already: it loads again, with its own settings; its sessions end.
      if (const size_t jobs = JobsOn(*it->second.model); jobs > 0) {
        return absl::FailedPreconditionError(
            absl::StrCat(jobs, " generations are running on ", resolved.name, "; load it again once they end"));
      }
      residency = it->second.residency;
      vram = it->second.vram;
      evicted.push_back(TakeModel(resolved.name));
    }
  }
  if (!evicted.empty()) Release(evicted.back());
  OCTO_ASSIGN_OR_RETURN(const Manifest manifest, ReadManifest(dir));
  OCTO_ASSIGN_OR_RETURN(const std::vector<uint64_t> layer_bytes, LayerFileSizes(manifest));
  absl::Status room = MakeModelRoom(resolved.name, layer_bytes, residency, vram, &evicted);
  absl::StatusOr<ModelSummary> loaded = room.ok() ? OpenModel(from, residency, vram) : absl::StatusOr<ModelSummary>(room);
  if (loaded.ok() || evicted.empty()) return loaded;
  // Transactional: what this load unloaded serves again, as it was.
  std::vector<std::string> back;
  for (const ModelSlot& slot : evicted) {
    absl::StatusOr<ModelSummary> again = OpenModel(slot.from, slot.residency, slot.vram);
    if (!again.ok()) {
      Log(absl::StrCat("reloading ", slot.from.name, " failed too: ", again.status().message()));
      continue;
    }
    Log(absl::StrCat(slot.from.name, " is loaded again"));
    back.push_back(slot.from.name);
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = models_.find(slot.from.name); it != models_.end()) {
      it->second.order = slot.order;
      it->second.keep_alive = slot.keep_alive;
      it->second.last_used = slot.last_used;
    }
  }
  if (back.empty()) return loaded.status();
  return absl::Status(loaded.status().code(),
                      absl::StrCat(loaded.status().message(), "; ", absl::StrJoin(back, ", "),
                                   back.size() == 1 ? " is" : " are", " still loaded"));
}

absl::StatusOr<ModelSummary> RuntimeImpl::OpenModel(const LoadedFrom& from, const ResidencySettings& residency,
                                                    const VramSettings& vram) {
  // The draft first (it is small), so a CUDA target's auto VRAM budget
  // sees the device memory it holds.
  std::shared_ptr<DraftModel> draft;
  if (!from.draft.empty() && from.draft != kNoDraftModel) {
    OCTO_ASSIGN_OR_RETURN(const Manifest manifest, ReadManifest(from.dir));
    absl::StatusOr<Tokenizer> tokenizer = Tokenizer::FromMetadata(manifest.tokenizer);
    if (!tokenizer.ok()) return Annotate(tokenizer.status(), absl::StrCat("loading ", from.name));
    // The draft's backend resolves as the target's will ("auto" alike).
    absl::StatusOr<std::shared_ptr<DraftModel>> loaded =
        LoadDraft(from.draft, from.name, *tokenizer, manifest.config.vocab_size, options_.backend);
    if (!loaded.ok()) return Annotate(loaded.status(), absl::StrCat("loading ", from.name));
    draft = std::move(*loaded);
  }
  ModelLoadOptions load;
  load.dir = from.dir;
  load.path = from.name;
  load.residency = residency;
  load.stream.loader_path = options_.loader_path;
  load.stream.loader_args = options_.loader_args;
  load.stream.direct_io = options_.direct_io;
  load.stream.stall_timeout = options_.loader_timeout;
  load.stream.stop = stop_;
  load.stream_factory = factory_;
  load.selective_experts = options_.selective_experts;
  load.n_threads = options_.n_threads;
  load.allow_simd = options_.allow_simd;
  load.backend = options_.backend;
  load.gpu = options_.gpu;
  load.vram = vram;
  load.kv_types = from.kv_types;
  absl::StatusOr<std::unique_ptr<LoadedModel>> loaded = LoadedModel::Load(load);
  if (!loaded.ok()) {
    DropDrafts(from.name);
    return Annotate(loaded.status(), absl::StrCat("loading ", from.name));
  }
  std::shared_ptr<LoadedModel> model = std::move(*loaded);
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return absl::UnavailableError("octod is shutting down");
  models_[from.name] = ModelSlot{.model = model,
                                 .draft = std::move(draft),
                                 .from = from,
                                 .residency = residency,
                                 .vram = vram,
                                 .last_used = Clock::now(),
                                 .keep_alive = options_.keep_alive,
                                 .order = ++loads_};
  const ModelSummary summary = Summary(*model);
  Log(absl::StrFormat("model loaded: %s (%s, %u layers, %s)%s", summary.path, summary.architecture, summary.n_layers,
                      FormatByteSize(summary.total_bytes),
                      summary.draft_model.empty() ? "" : ", draft model " + summary.draft_model));
  if (const std::string notice = model->PinNotice(); !notice.empty()) Log(absl::StrCat(summary.path, ": ", notice));
  // A quantized cache over heads narrower than a block: said once, here.
  if (const std::string notice = KvTypesNotice(model->config(), from.kv_types); !notice.empty()) {
    Log(absl::StrCat(summary.path, ": ", notice));
  }
  // A model without a chat template it recognises chats in chatml: said once,
  // here (an encoder does not chat).
  if (const std::string notice = model->TakeChatTemplateNotice();
      !notice.empty() && !IsEncoderArchitecture(model->config().architecture)) {
    Log(absl::StrCat(summary.path, ": ", notice));
  }
  return summary;
}

absl::StatusOr<std::vector<ModelSummary>> RuntimeImpl::ListModels() {
  OCTO_ASSIGN_OR_RETURN(std::vector<ModelSummary> models, ScanModels(options_.models_root));
  std::lock_guard<std::mutex> lock(mu_);
  for (ModelSummary& m : models) {
    if (auto it = models_.find(m.path); it != models_.end()) m = Summary(*it->second.model);
  }
  return models;
}

}  // namespace octo
