// manifest.json: what a layer directory holds. Written last by decompose,
// read first by verify and by the daemon. See storage/FORMAT.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/format.h"
#include "storage/gguf_value.h"
#include "storage/ggml_type.h"
#include "storage/model_config.h"

namespace octo {

struct ManifestTensor {
  std::string name;             // GGUF name, e.g. "blk.3.attn_q.weight"
  GgmlTypeInfo type;
  std::vector<uint64_t> shape;  // ggml order, shape[0] is the row length
  uint64_t offset = 0;          // from the start of the file, multiple of kAlignment
  uint64_t bytes = 0;           // GgmlTensorBytes(type, shape)
  // Format 2, the stacked expert tensors (ffn_{gate,up,down}_exps) of a MoE
  // layer: expert e's slice (bytes / n_experts long) starts at
  // offset + e * expert_stride. 0 = packed as in the GGUF (format 1, and every other tensor).
  uint64_t expert_stride = 0;
};

// Format 2, a MoE layer file: the dense part (header page and every tensor
// but the stacked expert tensors) is [0, offset); expert e's block, holding
// its slices of gate, up and down each at an aligned offset, is
// [offset + e * stride, offset + (e + 1) * stride). Each has its own checksum.
struct ExpertBlocks {
  uint64_t offset = 0;              // aligned; also the dense part's length
  uint64_t stride = 0;              // aligned block length
  uint32_t count = 0;               // config.n_experts
  uint64_t dense_checksum = 0;      // XXH64 of [0, offset)
  std::vector<uint64_t> checksums;  // XXH64 of each expert block, by expert
};

struct ManifestFile {
  std::string name;             // FileNameFor(kind, layer)
  FileKind kind = FileKind::kLayer;
  uint32_t layer = kNoLayer;
  uint64_t size = 0;            // bytes, multiple of kAlignment, header included
  uint64_t checksum = 0;        // XXH64 of the whole file
  std::vector<ManifestTensor> tensors;
  std::optional<ExpertBlocks> experts;  // format 2 MoE layer files only
};

// The byte range of a format-2 MoE layer file's dense part and of expert e's block.
struct ByteRange { uint64_t offset = 0; uint64_t bytes = 0; };
ByteRange DenseRange(const ManifestFile& file);           // [0, experts->offset), or the whole file without experts
ByteRange ExpertRange(const ManifestFile& file, uint32_t expert);  // requires file.experts and expert < count

using MetadataList = std::vector<std::pair<std::string, GgufValue>>;

struct Manifest {
  // What the directory was written as: kOldestFormatVersion .. kFormatVersion.
  // ManifestToJson writes it; PlanLayerDirectory makes kFormatVersion.
  uint32_t format_version = kFormatVersion;
  ModelConfig config;
  std::string source_name;      // the GGUF's file name, informational
  uint64_t source_bytes = 0;
  uint32_t source_gguf_version = 0;
  MetadataList tokenizer;       // every tokenizer.* key (tokenizer.ggml.*, tokenizer.chat_template)
  MetadataList metadata;        // every other GGUF key, for reference
  std::vector<ManifestFile> files;  // embed, layer_000 … layer_N-1, final_norm, lm_head, extra

  const ManifestFile* FindFile(absl::string_view name) const;
  const ManifestFile* Layer(uint32_t layer) const;
  const GgufValue* FindTokenizerKey(absl::string_view key) const;
};

// Encodes as pretty-printed JSON.
std::string ManifestToJson(const Manifest& manifest);

// Parses and validates all of it: format name and version, config, every
// file (expected set of names, sizes, checksums, expert blocks) and every
// tensor (type, shape, byte count, aligned offset inside the file, no
// overlaps, expert slices inside their blocks, the tensors the architecture
// needs). INVALID_ARGUMENT naming the defect, or FAILED_PRECONDITION for a
// format version this build does not read (it reads kOldestFormatVersion to
// kFormatVersion).
absl::StatusOr<Manifest> ParseManifest(absl::string_view json_text);

// Reads <dir>/manifest.json and parses it.
absl::StatusOr<Manifest> ReadManifest(const std::string& dir);

// Checks the files and tensors of a manifest (used by ParseManifest, and
// by decompose before it writes anything).
absl::Status ValidateManifestLayout(const Manifest& manifest);

}  // namespace octo
