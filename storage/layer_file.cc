#include "storage/layer_file.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "storage/byte_order.h"
#include "storage/xxhash64.h"

namespace octo {

void EncodeFileHeader(const FileHeader& header, std::span<uint8_t> page) {
  std::memset(page.data(), 0, page.size());
  std::memcpy(page.data() + kHeaderMagicOffset, kFileMagic, sizeof(kFileMagic));
  StoreLE<uint32_t>(page.data() + kHeaderVersionOffset, header.format_version);
  StoreLE<uint32_t>(page.data() + kHeaderKindOffset, static_cast<uint32_t>(header.kind));
  StoreLE<uint32_t>(page.data() + kHeaderLayerOffset, header.layer);
  StoreLE<uint32_t>(page.data() + kHeaderTensorCountOffset, header.tensor_count);
  StoreLE<uint64_t>(page.data() + kHeaderFileSizeOffset, header.file_size);
  StoreLE<uint64_t>(page.data() + kHeaderChecksumOffset, Xxh64Hash(page.first(kHeaderChecksumOffset)));
}

absl::StatusOr<FileHeader> DecodeFileHeader(std::span<const uint8_t> page) {
  if (page.size() < kHeaderUsedBytes) return absl::DataLossError("file is shorter than its header");
  if (std::memcmp(page.data() + kHeaderMagicOffset, kFileMagic, sizeof(kFileMagic)) != 0) {
    return absl::DataLossError("not an Octo model file (bad magic)");
  }
  const uint64_t stored = LoadLE<uint64_t>(page.data() + kHeaderChecksumOffset);
  const uint64_t actual = Xxh64Hash(page.first(kHeaderChecksumOffset));
  if (stored != actual) {
    return absl::DataLossError(absl::StrFormat("header checksum mismatch (stored %016x, computed %016x)", stored, actual));
  }
  const uint32_t version = LoadLE<uint32_t>(page.data() + kHeaderVersionOffset);
  if (version < kOldestFormatVersion || version > kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat("file has format version ", version, ", this build reads versions ",
                                                      kOldestFormatVersion, " to ", kFormatVersion));
  }
  FileHeader header;
  header.format_version = version;
  header.kind = static_cast<FileKind>(LoadLE<uint32_t>(page.data() + kHeaderKindOffset));
  if (FileKindName(header.kind).empty()) return absl::DataLossError("header has an unknown file kind");
  header.layer = LoadLE<uint32_t>(page.data() + kHeaderLayerOffset);
  header.tensor_count = LoadLE<uint32_t>(page.data() + kHeaderTensorCountOffset);
  header.file_size = LoadLE<uint64_t>(page.data() + kHeaderFileSizeOffset);
  return header;
}

absl::string_view FileKindName(FileKind kind) {
  switch (kind) {
    case FileKind::kEmbed: return "embed";
    case FileKind::kLayer: return "layer";
    case FileKind::kLmHead: return "lm_head";
    case FileKind::kFinalNorm: return "final_norm";
    case FileKind::kExtra: return "extra";
  }
  return {};
}

absl::StatusOr<FileKind> FileKindFromName(absl::string_view name) {
  for (FileKind kind : {FileKind::kEmbed, FileKind::kLayer, FileKind::kLmHead, FileKind::kFinalNorm, FileKind::kExtra}) {
    if (FileKindName(kind) == name) return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown file kind '", name, "'"));
}

std::string FileNameFor(FileKind kind, uint32_t layer) {
  if (kind == FileKind::kLayer) return absl::StrFormat("layer_%03u.bin", layer);
  return absl::StrCat(FileKindName(kind), ".bin");
}

}  // namespace octo
