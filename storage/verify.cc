#include "storage/verify.h"

#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "storage/chunk_pipeline.h"
#include "storage/expert_blocks.h"
#include "storage/file.h"
#include "storage/layer_file.h"
#include "storage/section_hasher.h"
#include "storage/status_macros.h"
#include "storage/xxhash64.h"

namespace octo {
namespace {

constexpr uint64_t kVerifyChunkBytes = 8ull << 20;

absl::Status CheckHeader(const FileHeader& h, const ManifestFile& entry) {
  if (h.kind != entry.kind || (entry.kind == FileKind::kLayer && h.layer != entry.layer)) {
    return absl::DataLossError(absl::StrCat("header says ", FileKindName(h.kind),
                                            h.kind == FileKind::kLayer ? absl::StrCat(" ", h.layer) : "",
                                            ", the manifest expects ", entry.name));
  }
  if (entry.experts.has_value() && h.format_version < 2) {
    return absl::DataLossError(absl::StrCat("header says format version ", h.format_version,
                                            ", but the manifest lays the file out in expert blocks (version 2)"));
  }
  if (h.tensor_count != entry.tensors.size() || h.file_size != entry.size) {
    return absl::DataLossError(absl::StrCat("header says ", h.tensor_count, " tensors and ", h.file_size,
                                            " bytes, the manifest says ", entry.tensors.size(), " and ", entry.size));
  }
  return absl::OkStatus();
}

// For a file with expert blocks: the dense part's and each block's checksum.
// One DATA_LOSS naming every part that does not match.
absl::Status CheckExpertChecksums(const ManifestFile& entry, const SectionHasher& hasher) {
  if (!entry.experts.has_value()) return absl::OkStatus();
  const ExpertBlocks& x = *entry.experts;
  std::vector<std::string> bad;
  auto check = [&](const std::string& part, uint64_t want, uint64_t got) {
    if (want == got) return;
    bad.push_back(absl::StrCat(part, ": checksum mismatch (the manifest says ", FormatChecksum(want),
                               ", the bytes hash to ", FormatChecksum(got), ")"));
  };
  check("dense part", x.dense_checksum, hasher.SectionDigest(0));
  for (uint32_t e = 0; e < x.count; ++e) {
    check(absl::StrCat("expert ", e, " of layer ", entry.layer), x.checksums[e], hasher.SectionDigest(1 + e));
  }
  if (bad.empty()) return absl::OkStatus();
  return absl::DataLossError(absl::StrJoin(bad, "; "));
}

}  // namespace

absl::Status VerifyModelFile(const std::string& path, const ManifestFile& entry,
                             const std::function<void(uint64_t)>& on_bytes) {
  OCTO_ASSIGN_OR_RETURN(File file, File::OpenForRead(path));
  OCTO_ASSIGN_OR_RETURN(uint64_t size, file.Size());
  if (size != entry.size) {
    return absl::DataLossError(absl::StrCat("size is ", size, " bytes, the manifest says ", entry.size));
  }
  // Chunk k covers bytes [k * chunk, min(size, (k + 1) * chunk)).
  const uint64_t chunk = std::min(kVerifyChunkBytes, size);
  ChunkBuffers buffers = {std::vector<uint8_t>(chunk), std::vector<uint8_t>(chunk)};
  SectionHasher hasher(ExpertChecksumRanges(entry));
  absl::Status header_status;
  auto read = [&](size_t k, std::span<uint8_t> buffer) -> absl::StatusOr<std::span<uint8_t>> {
    const uint64_t pos = k * chunk;
    std::span<uint8_t> data = buffer.first(std::min<uint64_t>(chunk, size - pos));
    OCTO_RETURN_IF_ERROR(file.ReadAt(pos, data));
    return data;
  };
  auto check = [&](size_t k, std::span<const uint8_t> data) -> absl::Status {
    if (k == 0) {
      auto header = DecodeFileHeader(data);
      header_status = header.ok() ? CheckHeader(*header, entry) : header.status();
    }
    hasher.Update(data);
    if (on_bytes) on_bytes(data.size());
    return absl::OkStatus();
  };
  const size_t n_chunks = chunk == 0 ? 0 : (size + chunk - 1) / chunk;
  OCTO_RETURN_IF_ERROR(PipelineChunks(n_chunks, buffers, read, check));
  file.DropCache();
  if (!header_status.ok()) return header_status;
  // The parts first: damage inside one expert's block is named as such.
  OCTO_RETURN_IF_ERROR(CheckExpertChecksums(entry, hasher));
  const uint64_t digest = hasher.Digest();
  if (digest != entry.checksum) {
    return absl::DataLossError(absl::StrCat("checksum mismatch: the manifest says ", FormatChecksum(entry.checksum),
                                            ", the file hashes to ", FormatChecksum(digest)));
  }
  return absl::OkStatus();
}

VerifyReport VerifyModelDir(const std::string& dir, const std::function<void(uint64_t, uint64_t)>& progress) {
  VerifyReport report;
  auto manifest = ReadManifest(dir);
  if (!manifest.ok()) {
    report.problems.push_back({kManifestName, std::string(manifest.status().message())});
    return report;
  }
  uint64_t total = 0;
  std::set<std::string> listed = {kManifestName};
  for (const ManifestFile& f : manifest->files) {
    total += f.size;
    listed.insert(f.name);
  }
  for (const ManifestFile& f : manifest->files) {
    absl::Status status = VerifyModelFile(dir + "/" + f.name, f, [&](uint64_t n) {
      report.bytes_checked += n;
      if (progress) progress(report.bytes_checked, total);
    });
    if (status.ok()) report.files_ok.push_back(f.name);
    else report.problems.push_back({f.name, std::string(status.message())});
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!listed.count(name)) report.notes.push_back(name + " is not listed in the manifest (ignored)");
  }
  return report;
}

}  // namespace octo
