#include "daemon/engine/weight_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/file.h"
#include "storage/layer_file.h"
#include "storage/status_macros.h"
#include "storage/xxhash64.h"

namespace octo {

absl::StatusOr<ResidencyPlan> PlanResidency(const std::vector<uint64_t>& layer_bytes, uint64_t budget) {
  ResidencyPlan plan;
  plan.resident.assign(layer_bytes.size(), false);
  uint64_t total = 0;
  for (uint64_t b : layer_bytes) total += b;
  if (total <= budget) {
    plan.resident.assign(layer_bytes.size(), true);
    plan.held_bytes = total;
    return plan;
  }
  // Not everything fits: keep a staging buffer for the largest layer (any
  // layer may end up streamed), then fill the rest, outermost layers first.
  const uint64_t largest = layer_bytes.empty() ? 0 : *std::max_element(layer_bytes.begin(), layer_bytes.end());
  if (largest > budget) {
    return absl::ResourceExhaustedError(absl::StrCat("layer budget of ", budget,
                                                     " bytes is smaller than the largest layer (", largest,
                                                     " bytes); streaming needs room for one layer"));
  }
  plan.staging_bytes = largest;
  uint64_t held = largest;
  const size_t n = layer_bytes.size();
  for (size_t i = 0; i < n; ++i) {
    // 0, n-1, 1, n-2, ...
    const size_t layer = (i % 2 == 0) ? i / 2 : n - 1 - i / 2;
    if (held + layer_bytes[layer] > budget) continue;
    held += layer_bytes[layer];
    plan.resident[layer] = true;
  }
  plan.held_bytes = held;
  return plan;
}

absl::Status WeightStore::ReadFile(const ManifestFile& file, AlignedBuffer& buffer) const {
  const std::string path = dir_ + "/" + file.name;
  OCTO_ASSIGN_OR_RETURN(File f, File::OpenForRead(path));
  OCTO_ASSIGN_OR_RETURN(uint64_t size, f.Size());
  if (size != file.size) {
    return absl::DataLossError(absl::StrCat(file.name, " is ", size, " bytes; the manifest says ", file.size));
  }
  if (buffer.size() < file.size) buffer = AlignedBuffer(file.size);
  std::span<uint8_t> bytes(buffer.data(), file.size);
  OCTO_RETURN_IF_ERROR(Annotate(f.ReadAt(0, bytes), file.name));
  if (Xxh64Hash(bytes) != file.checksum) {
    return absl::DataLossError(absl::StrCat(file.name, ": checksum mismatch (the file is damaged; run "
                                            "`octo-ctl verify` and decompose the model again)"));
  }
  OCTO_ASSIGN_OR_RETURN(FileHeader header, DecodeFileHeader(bytes.first(kHeaderBytes)));
  if (header.kind != file.kind || header.layer != file.layer) {
    return absl::DataLossError(absl::StrCat(file.name, ": header says ", FileNameFor(header.kind, header.layer)));
  }
  return absl::OkStatus();
}

absl::Status WeightStore::LoadGlobals() {
  const ManifestFile* embed = nullptr;
  const ManifestFile* lm_head = nullptr;
  const ManifestFile* final_norm = nullptr;
  const ManifestFile* extra = nullptr;
  for (const ManifestFile& f : manifest_.files) {
    if (f.kind == FileKind::kEmbed) embed = &f;
    if (f.kind == FileKind::kLmHead) lm_head = &f;
    if (f.kind == FileKind::kFinalNorm) final_norm = &f;
    if (f.kind == FileKind::kExtra) extra = &f;
  }
  if (embed == nullptr || final_norm == nullptr || (lm_head == nullptr && !config().tied_embeddings)) {
    return absl::InvalidArgumentError("manifest lacks embed.bin, final_norm.bin or lm_head.bin");
  }
  auto load = [&](const ManifestFile* f) -> absl::StatusOr<const uint8_t*> {
    global_buffers_.emplace_back();
    OCTO_RETURN_IF_ERROR(ReadFile(*f, global_buffers_.back()));
    return global_buffers_.back().data();
  };
  global_buffers_.reserve(4);  // the views below point into these buffers
  OCTO_ASSIGN_OR_RETURN(const uint8_t* embed_bytes, load(embed));
  OCTO_ASSIGN_OR_RETURN(globals_.token_embd, BindMatrix(*embed, embed_bytes, "token_embd.weight"));
  globals_.lm_head = globals_.token_embd;
  if (lm_head != nullptr) {
    OCTO_ASSIGN_OR_RETURN(const uint8_t* bytes, load(lm_head));
    OCTO_ASSIGN_OR_RETURN(globals_.lm_head, BindMatrix(*lm_head, bytes, "output.weight"));
  }
  OCTO_ASSIGN_OR_RETURN(const uint8_t* norm_bytes, load(final_norm));
  OCTO_ASSIGN_OR_RETURN(globals_.final_norm, BindF32(*final_norm, norm_bytes, "output_norm.weight"));
  if (extra != nullptr) {
    OCTO_ASSIGN_OR_RETURN(const uint8_t* bytes, load(extra));
    for (const ManifestTensor& t : extra->tensors) {
      if (t.name != "rope_freqs.weight") continue;
      if (t.shape.size() != 1 || t.shape[0] != config().rope_dim / 2) {
        return absl::InvalidArgumentError(absl::StrCat("rope_freqs.weight must have rope_dim / 2 = ",
                                                       config().rope_dim / 2, " elements"));
      }
      OCTO_ASSIGN_OR_RETURN(globals_.rope_freqs, BindF32(*extra, bytes, t.name));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<WeightStore>> WeightStore::Open(const std::string& dir,
                                                               const WeightStoreOptions& options) {
  std::unique_ptr<WeightStore> store(new WeightStore());
  store->dir_ = dir;
  OCTO_ASSIGN_OR_RETURN(store->manifest_, ReadManifest(dir));
  const ModelConfig& config = store->manifest_.config;
  OCTO_RETURN_IF_ERROR(store->LoadGlobals());

  std::vector<uint64_t> layer_bytes(config.n_layers);
  for (uint32_t l = 0; l < config.n_layers; ++l) {
    const ManifestFile* f = store->manifest_.Layer(l);
    if (f == nullptr) return absl::InvalidArgumentError(absl::StrCat("manifest lacks layer ", l));
    layer_bytes[l] = f->size;
  }
  OCTO_ASSIGN_OR_RETURN(store->plan_, PlanResidency(layer_bytes, options.layer_budget_bytes));

  if (store->plan_.staging_bytes > 0) store->staging_ = AlignedBuffer(store->plan_.staging_bytes);
  store->resident_buffers_.resize(config.n_layers);
  store->resident_weights_.resize(config.n_layers);
  for (uint32_t l = 0; l < config.n_layers; ++l) {
    const ManifestFile& f = *store->manifest_.Layer(l);
    if (store->plan_.resident[l]) {
      AlignedBuffer& buffer = store->resident_buffers_[l];
      OCTO_RETURN_IF_ERROR(store->ReadFile(f, buffer));
      OCTO_ASSIGN_OR_RETURN(store->resident_weights_[l], BindLayerWeights(config, f, buffer.data()));
    } else {
      // Bind over the (empty) staging buffer: binding reads only the
      // manifest, so a malformed layer is reported now, not mid-generation.
      OCTO_RETURN_IF_ERROR(BindLayerWeights(config, f, store->staging_.data()).status());
    }
  }
  return store;
}

absl::StatusOr<const LayerWeights*> WeightStore::Acquire(uint32_t layer) {
  if (layer >= config().n_layers) {
    return absl::InvalidArgumentError(absl::StrCat("layer ", layer, " of ", config().n_layers));
  }
  if (plan_.resident[layer]) return &resident_weights_[layer];
  if (staged_layer_ != kNoLayer) {
    return absl::FailedPreconditionError(absl::StrCat("layer ", layer, " acquired while layer ",
                                                      staged_layer_, " holds the staging buffer"));
  }
  const ManifestFile& f = *manifest_.Layer(layer);
  OCTO_RETURN_IF_ERROR(ReadFile(f, staging_));
  streamed_bytes_ += f.size;
  OCTO_ASSIGN_OR_RETURN(staged_weights_, BindLayerWeights(config(), f, staging_.data()));
  staged_layer_ = layer;
  return &staged_weights_;
}

void WeightStore::Release(uint32_t layer) {
  if (layer == staged_layer_) staged_layer_ = kNoLayer;
}

}  // namespace octo
