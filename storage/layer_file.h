// The header page that opens every file of a layer directory, and the file
// names. Writing and checking live together so the two cannot drift.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "storage/format.h"

namespace octo {

struct FileHeader {
  FileKind kind = FileKind::kLayer;
  uint32_t layer = kNoLayer;  // layer index for kLayer files
  uint32_t tensor_count = 0;
  uint64_t file_size = 0;
  // Written as given (decompose writes kFormatVersion); decoding accepts
  // kOldestFormatVersion .. kFormatVersion.
  uint32_t format_version = kFormatVersion;
};

// Fills `page` (kHeaderBytes long) with the encoded header.
void EncodeFileHeader(const FileHeader& header, std::span<uint8_t> page);

// Decodes and checks magic, version and header checksum. DATA_LOSS naming
// the defect when the page is not a valid header; FAILED_PRECONDITION for a
// format version this build does not read.
absl::StatusOr<FileHeader> DecodeFileHeader(std::span<const uint8_t> page);

// "layer_007.bin", "embed.bin", ...
std::string FileNameFor(FileKind kind, uint32_t layer);
absl::string_view FileKindName(FileKind kind);
absl::StatusOr<FileKind> FileKindFromName(absl::string_view name);

}  // namespace octo
