// PlanLayerDirectory: which tensor goes where, before any byte is written.
#include <map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "storage/byte_order.h"
#include "storage/decompose.h"
#include "storage/expert_blocks.h"
#include "storage/gguf_json.h"
#include "storage/layer_file.h"
#include "storage/status_macros.h"
#include "storage/tensor_layout.h"

namespace octo {
namespace {

// Places `t` at `*offset` and moves `*offset` to the next aligned byte after it.
absl::Status Place(ManifestTensor& t, uint64_t* offset) {
  t.offset = *offset;
  if (!AlignUp(*offset + t.bytes, kAlignment, offset)) return absl::OutOfRangeError("file size overflows");
  return absl::OkStatus();
}

// Format 1's layout, and format 2's for every file but a MoE layer's: the
// tensors one after another in GGUF order, each at an aligned offset.
absl::Status LayOutPacked(ManifestFile& f) {
  uint64_t offset = kHeaderBytes;
  for (ManifestTensor& t : f.tensors) OCTO_RETURN_IF_ERROR(Place(t, &offset));
  f.size = offset;
  return absl::OkStatus();
}

// A MoE layer file: every tensor but the stacked expert tensors packed as
// above (the dense part), then one block per expert holding its slices of
// gate, up and down, in that order, each at an aligned offset in the block.
// Slice e of a stacked tensor is expert e's rows: bytes / n_experts at
// e * slice in the GGUF (ggml shape [cols, rows, n_experts]).
absl::Status LayOutExpertBlocks(ManifestFile& f, uint32_t n_experts) {
  uint64_t offset = kHeaderBytes;
  for (ManifestTensor& t : f.tensors) {
    if (!IsStackedExpertTensor(t.name)) OCTO_RETURN_IF_ERROR(Place(t, &offset));
  }
  ExpertBlocks blocks;
  blocks.offset = offset;
  blocks.count = n_experts;
  blocks.checksums.assign(n_experts, 0);
  uint64_t in_block = 0;
  std::vector<ManifestTensor*> stacked;
  for (absl::string_view suffix : kStackedExpertSuffixes) {
    for (ManifestTensor& t : f.tensors) {
      if (IsStackedExpertTensor(t.name) && absl::EndsWith(t.name, suffix)) {
        t.offset = in_block;  // made absolute once the stride is known
        if (!AlignUp(in_block + t.bytes / n_experts, kAlignment, &in_block)) {
          return absl::OutOfRangeError("expert block size overflows");
        }
        stacked.push_back(&t);
      }
    }
  }
  blocks.stride = in_block;
  for (ManifestTensor* t : stacked) {
    t->offset += blocks.offset;
    t->expert_stride = blocks.stride;
  }
  if (__builtin_mul_overflow(uint64_t{n_experts}, blocks.stride, &f.size) ||
      __builtin_add_overflow(f.size, blocks.offset, &f.size)) {
    return absl::OutOfRangeError("file size overflows");
  }
  f.experts = std::move(blocks);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Manifest> PlanLayerDirectory(const GgufFile& gguf, const std::string& source_name,
                                            uint32_t format_version) {
  if (format_version < kOldestFormatVersion || format_version > kFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat("format version ", format_version, " is not ",
                                                   kOldestFormatVersion, "..", kFormatVersion));
  }
  Manifest m;
  m.format_version = format_version;
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
  // Refuse a model that cannot run before laying it out, so a missing or
  // misshapen expert tensor is named as such.
  OCTO_RETURN_IF_ERROR(CheckModelTensors(m.config, [&](absl::string_view name) -> const std::vector<uint64_t>* {
    const GgufTensorInfo* t = gguf.FindTensor(name);
    return t == nullptr ? nullptr : &t->dims;
  }));
  for (auto& [key, f] : files) {
    if (f.tensors.size() > kMaxTensorsPerFile) return absl::InvalidArgumentError(f.name + ": too many tensors");
    const bool moe_layer = f.kind == FileKind::kLayer && m.config.n_experts > 0 && format_version >= 2;
    OCTO_RETURN_IF_ERROR(moe_layer ? LayOutExpertBlocks(f, m.config.n_experts) : LayOutPacked(f));
    m.files.push_back(std::move(f));
  }
  OCTO_RETURN_IF_ERROR(ValidateManifestLayout(m));
  return m;
}

}  // namespace octo
