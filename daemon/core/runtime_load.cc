// Loading and unloading models: a name resolved under the models root, a
// GGUF decomposed into the cache first (while the old model still serves),
// and a load that fails leaves the previous model loaded again.
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/core/model_paths.h"
#include "daemon/core/runtime_impl.h"
#include "storage/byte_size.h"
#include "storage/gguf_cache.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

// How often a decomposition in progress is logged.
constexpr double kProgressLogSeconds = 10;

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

absl::StatusOr<ModelSummary> RuntimeImpl::LoadModel(const std::string& name,
                                                    const std::optional<std::string>& draft_model) {
  absl::StatusOr<ResolvedModel> resolved = ResolveModelPath(options_.models_root, name);
  if (!resolved.ok()) {
    Log(absl::StrCat("load refused: ", resolved.status().message()));
    return resolved.status();
  }
  Log(absl::StrCat("loading ", resolved->name));
  SetLoading(LoadProgress{.model = resolved->name, .stage = "loading"});
  absl::StatusOr<ModelSummary> loaded = LoadResolved(*resolved, draft_model);
  SetLoading(std::nullopt);
  if (!loaded.ok()) Log(absl::StrCat("loading ", resolved->name, " failed: ", loaded.status().message()));
  return loaded;
}

absl::StatusOr<ModelSummary> RuntimeImpl::LoadResolved(const ResolvedModel& resolved,
                                                       const std::optional<std::string>& draft_model) {
  OCTO_ASSIGN_OR_RETURN(const std::string dir, ModelDir(resolved));
  const std::string draft_path = draft_model.has_value() ? *draft_model : options_.draft_model;
  ControlScope control(*this);
  // Budgets set at run time belong to the model they were set for.
  const ResidencySettings previous_residency = residency_;
  const VramSettings previous_vram = vram_;
  const std::string previous_residency_model = residency_model_;
  if (!residency_model_.empty() && residency_model_ != resolved.name) {
    Log(absl::StrCat("residency: back to the configured budgets (", residency_model_, "'s were set for it)"));
    residency_ = configured_residency_;
    vram_ = configured_vram_;
    residency_model_.clear();
  }
  const LoadedFrom previous = loaded_from_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("octod is shutting down");
    if (!jobs_.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(jobs_.size(), " generations are running; load ",
                                                        resolved.name, " once they end"));
    }
  }
  // The old model goes first: two models need not fit in memory at once.
  DropModel();
  absl::StatusOr<ModelSummary> loaded = OpenModel(resolved.name, dir, draft_path);
  if (loaded.ok() || previous.name.empty()) return loaded;
  // Transactional: the previous model serves again, with its settings.
  residency_ = previous_residency;
  vram_ = previous_vram;
  residency_model_ = previous_residency_model;
  absl::StatusOr<ModelSummary> again = OpenModel(previous.name, previous.dir, previous.draft);
  if (!again.ok()) {
    Log(absl::StrCat("reloading ", previous.name, " failed too: ", again.status().message()));
    return loaded.status();
  }
  Log(absl::StrCat(previous.name, " is loaded again"));
  return absl::Status(loaded.status().code(),
                      absl::StrCat(loaded.status().message(), "; ", previous.name, " is still loaded"));
}

void RuntimeImpl::DropModel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The old model's sessions cannot continue on another model.
    sessions_.clear();
    model_.reset();
    default_draft_.reset();
  }
  std::lock_guard<std::mutex> lock(drafts_mu_);
  drafts_.clear();  // checked against the old model's vocabulary
  loaded_from_ = LoadedFrom{};
}

absl::StatusOr<ModelSummary> RuntimeImpl::OpenModel(const std::string& name, const std::string& dir,
                                                    const std::string& draft_path) {
  // The draft first (it is small), so a CUDA target's auto VRAM budget
  // sees the device memory it holds.
  std::shared_ptr<DraftModel> draft;
  if (!draft_path.empty() && draft_path != kNoDraftModel) {
    OCTO_ASSIGN_OR_RETURN(const Manifest manifest, ReadManifest(dir));
    absl::StatusOr<Tokenizer> tokenizer = Tokenizer::FromMetadata(manifest.tokenizer);
    if (!tokenizer.ok()) return Annotate(tokenizer.status(), absl::StrCat("loading ", name));
    // The draft's backend resolves as the target's will ("auto" alike).
    absl::StatusOr<std::shared_ptr<DraftModel>> loaded =
        LoadDraft(draft_path, *tokenizer, manifest.config.vocab_size, options_.backend);
    if (!loaded.ok()) return Annotate(loaded.status(), absl::StrCat("loading ", name));
    draft = std::move(*loaded);
  }
  ModelLoadOptions load;
  load.dir = dir;
  load.path = name;
  load.residency = residency_;
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
  load.vram = vram_;
  absl::StatusOr<std::unique_ptr<LoadedModel>> loaded = LoadedModel::Load(load);
  if (!loaded.ok()) {
    std::lock_guard<std::mutex> lock(drafts_mu_);
    drafts_.clear();
    return Annotate(loaded.status(), absl::StrCat("loading ", name));
  }
  loaded_from_ = LoadedFrom{.name = name, .dir = dir, .draft = draft_path};
  std::lock_guard<std::mutex> lock(mu_);
  model_ = std::move(*loaded);
  default_draft_ = std::move(draft);
  const ModelSummary summary = Summary(*model_);
  Log(absl::StrFormat("model loaded: %s (%s, %u layers, %s)%s", summary.path, summary.architecture, summary.n_layers,
                      FormatByteSize(summary.total_bytes),
                      summary.draft_model.empty() ? "" : ", draft model " + summary.draft_model));
  // A model without a chat template it recognises chats in chatml: said once, here.
  if (const std::string notice = model_->TakeChatTemplateNotice(); !notice.empty()) {
    Log(absl::StrCat(summary.path, ": ", notice));
  }
  return summary;
}

absl::Status RuntimeImpl::UnloadModel() {
  ControlScope control(*this);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (model_ == nullptr) return absl::FailedPreconditionError("no model is loaded");
    if (!jobs_.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(jobs_.size(), " generations are running"));
    }
  }
  const std::string name = loaded_from_.name;
  DropModel();
  Log(absl::StrCat("model unloaded: ", name));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ModelSummary>> RuntimeImpl::ListModels() {
  OCTO_ASSIGN_OR_RETURN(std::vector<ModelSummary> models, ScanModels(options_.models_root));
  std::shared_ptr<LoadedModel> loaded = model();
  for (ModelSummary& m : models) {
    m.loaded = loaded != nullptr && loaded->summary().path == m.path;
    if (m.loaded) {
      std::lock_guard<std::mutex> lock(mu_);
      m = Summary(*loaded);
    }
  }
  return models;
}

}  // namespace octo
