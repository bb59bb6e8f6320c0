// PlanLayerDirectory: which tensor goes where, before any byte is written.
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "storage/byte_order.h"
#include "storage/decompose.h"
#include "storage/gguf_json.h"
#include "storage/layer_file.h"
#include "storage/status_macros.h"
#include "storage/tensor_layout.h"

namespace octo {

absl::StatusOr<Manifest> PlanLayerDirectory(const GgufFile& gguf, const std::string& source_name) {
  Manifest m;
  OCTO_ASSIGN_OR_RETURN(m.config, ModelConfigFromGguf(gguf));
  m.source_name = source_name;
  m.source_bytes = gguf.file_size();
  m.source_gguf_version = gguf.version();
  for (const auto& [key, value] : gguf.metadata()) {
    if (absl::StartsWith(key, "tokenizer.")) m.tokenizer.emplace_back(key, value);
    else m.metadata.emplace_back(key, value);
  }

  // Group tensors by destination file, keeping GGUF order inside each file.
  // std::map orders files by (kind, layer): embed, layers, lm_head, final_norm, extra.
  std::map<std::pair<FileKind, uint32_t>, ManifestFile> files;
  for (const GgufTensorInfo& t : gguf.tensors()) {
    if (!IsValidUtf8(t.name)) return absl::InvalidArgumentError("a tensor name is not valid UTF-8");
    OCTO_ASSIGN_OR_RETURN(FileSlot slot, FileForTensor(t.name, m.config.n_layers));
    ManifestFile& f = files[{slot.kind, slot.layer}];
    f.kind = slot.kind;
    f.layer = slot.layer;
    f.name = FileNameFor(slot.kind, slot.layer);
    f.tensors.push_back({t.name, t.type, t.dims, 0, t.n_bytes});
  }
  for (auto& [key, f] : files) {
    if (f.tensors.size() > kMaxTensorsPerFile) return absl::InvalidArgumentError(f.name + ": too many tensors");
    uint64_t offset = kHeaderBytes;
    for (ManifestTensor& t : f.tensors) {
      t.offset = offset;
      if (!AlignUp(offset + t.bytes, kAlignment, &offset)) return absl::OutOfRangeError("file size overflows");
    }
    f.size = offset;
    m.files.push_back(std::move(f));
  }
  OCTO_RETURN_IF_ERROR(ValidateManifestLayout(m));
  return m;
}

}  // namespace octo
