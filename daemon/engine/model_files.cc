#include "daemon/engine/model_files.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/file.h"
#include "storage/layer_file.h"
#include "storage/status_macros.h"
#include "storage/xxhash64.h"

namespace octo {

absl::Status CheckModelFile(const ManifestFile& file, std::span<const uint8_t> bytes) {
  if (bytes.size() != file.size) {
    return absl::DataLossError(absl::StrCat(file.name, " is ", bytes.size(), " bytes; the manifest says ", file.size));
  }
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

absl::Status ReadModelFile(const std::string& dir, const ManifestFile& file, AlignedBuffer& buffer) {
  const std::string path = dir + "/" + file.name;
  OCTO_ASSIGN_OR_RETURN(File f, File::OpenForRead(path));
  OCTO_ASSIGN_OR_RETURN(uint64_t size, f.Size());
  if (size != file.size) {
    return absl::DataLossError(absl::StrCat(file.name, " is ", size, " bytes; the manifest says ", file.size));
  }
  if (buffer.size() < file.size) buffer = AlignedBuffer(file.size);
  std::span<uint8_t> bytes(buffer.data(), file.size);
  OCTO_RETURN_IF_ERROR(Annotate(f.ReadAt(0, bytes), file.name));
  return CheckModelFile(file, bytes);
}

uint64_t ResidentGlobals::bytes() const {
  uint64_t total = 0;
  for (const AlignedBuffer& b : buffers_) total += b.size();
  return total;
}

absl::StatusOr<ResidentGlobals> ResidentGlobals::Load(const std::string& dir, const Manifest& manifest) {
  const ModelConfig& config = manifest.config;
  const ManifestFile* embed = nullptr;
  const ManifestFile* lm_head = nullptr;
  const ManifestFile* final_norm = nullptr;
  const ManifestFile* extra = nullptr;
  for (const ManifestFile& f : manifest.files) {
    if (f.kind == FileKind::kEmbed) embed = &f;
    if (f.kind == FileKind::kLmHead) lm_head = &f;
    if (f.kind == FileKind::kFinalNorm) final_norm = &f;
    if (f.kind == FileKind::kExtra) extra = &f;
  }
  const bool encoder = IsEncoderArchitecture(config.architecture);
  if (embed == nullptr || (final_norm == nullptr && !encoder) || (lm_head == nullptr && !config.tied_embeddings)) {
    return absl::InvalidArgumentError("manifest lacks embed.bin, final_norm.bin or lm_head.bin");
  }
  if (encoder && extra == nullptr) {
    return absl::InvalidArgumentError("manifest lacks extra.bin (an encoder's token types and input norm)");
  }
  ResidentGlobals g;
  g.buffers_.reserve(4);  // the views below point into these buffers
  auto load = [&](const ManifestFile* f) -> absl::StatusOr<const uint8_t*> {
    g.buffers_.emplace_back();
    OCTO_RETURN_IF_ERROR(ReadModelFile(dir, *f, g.buffers_.back()));
    return g.buffers_.back().data();
  };
  GlobalWeights& w = g.weights_;
  OCTO_ASSIGN_OR_RETURN(const uint8_t* embed_bytes, load(embed));
  OCTO_ASSIGN_OR_RETURN(w.token_embd, BindMatrix(*embed, embed_bytes, "token_embd.weight"));
  w.lm_head = w.token_embd;
  if (lm_head != nullptr) {
    OCTO_ASSIGN_OR_RETURN(const uint8_t* bytes, load(lm_head));
    OCTO_ASSIGN_OR_RETURN(w.lm_head, BindMatrix(*lm_head, bytes, "output.weight"));
  }
  if (final_norm != nullptr) {
    OCTO_ASSIGN_OR_RETURN(const uint8_t* norm_bytes, load(final_norm));
    OCTO_ASSIGN_OR_RETURN(w.final_norm, BindF32(*final_norm, norm_bytes, "output_norm.weight"));
  }
  if (extra != nullptr) {
    OCTO_ASSIGN_OR_RETURN(const uint8_t* bytes, load(extra));
    if (encoder) {
      // Shapes were checked with the manifest (tensor_layout.h).
      OCTO_ASSIGN_OR_RETURN(w.token_types, BindMatrix(*extra, bytes, "token_types.weight"));
      if (config.architecture == "bert") {
        OCTO_ASSIGN_OR_RETURN(w.position_embd, BindMatrix(*extra, bytes, "position_embd.weight"));
      }
      OCTO_ASSIGN_OR_RETURN(w.embd_norm, BindF32(*extra, bytes, "token_embd_norm.weight"));
      OCTO_ASSIGN_OR_RETURN(w.embd_norm_b, BindF32(*extra, bytes, "token_embd_norm.bias"));
    }
    for (const ManifestTensor& t : extra->tensors) {
      if (t.name != "rope_freqs.weight") continue;
      if (t.shape.size() != 1 || t.shape[0] != config.rope_dim / 2) {
        return absl::InvalidArgumentError(absl::StrCat("rope_freqs.weight must have rope_dim / 2 = ",
                                                       config.rope_dim / 2, " elements"));
      }
      OCTO_ASSIGN_OR_RETURN(w.rope_freqs, BindF32(*extra, bytes, t.name));
    }
  }
  return g;
}

absl::StatusOr<std::vector<uint64_t>> LayerFileSizes(const Manifest& manifest) {
  std::vector<uint64_t> sizes(manifest.config.n_layers);
  for (uint32_t l = 0; l < manifest.config.n_layers; ++l) {
    const ManifestFile* f = manifest.Layer(l);
    if (f == nullptr) return absl::InvalidArgumentError(absl::StrCat("manifest lacks layer ", l));
    sizes[l] = f->size;
  }
  return sizes;
}

}  // namespace octo
