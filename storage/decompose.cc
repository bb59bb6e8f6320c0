// Decompose: copy each tensor of a GGUF into its layer-directory file (a MoE
// layer's stacked expert tensors slice by slice into their expert blocks),
// hash as we go, then publish the directory with one rename.
#include "storage/decompose.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "storage/chunk_pipeline.h"
#include "storage/expert_blocks.h"
#include "storage/file.h"
#include "storage/layer_file.h"
#include "storage/section_hasher.h"
#include "storage/status_macros.h"

namespace octo {
namespace {

namespace fs = std::filesystem;

// Where a decomposition is assembled: "<parent>/.<name>.partial-<pid>".
std::string PartialPrefix(const fs::path& out) { return "." + out.filename().string() + ".partial-"; }

// Removes partial directories left by runs that were killed (their pid is gone).
void RemoveStalePartials(const fs::path& out) {
  const std::string prefix = PartialPrefix(out);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    int pid = 0;
    if (!absl::StartsWith(name, prefix) || !absl::SimpleAtoi(name.substr(prefix.size()), &pid)) continue;
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) fs::remove_all(entry.path(), ec);
  }
}

// May `out` be replaced? Only an empty directory or one with a manifest.
absl::Status CheckReplaceable(const fs::path& out, bool overwrite) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(out, ec);
  if (!fs::exists(st)) return absl::OkStatus();
  if (!overwrite) {
    return absl::AlreadyExistsError(out.string() + " already exists; pass --force to replace it");
  }
  if (!fs::is_directory(st) || (!fs::is_empty(out, ec) && !fs::exists(out / kManifestName, ec))) {
    return absl::FailedPreconditionError(
        out.string() + " exists and is not a model directory (no manifest.json); refusing to replace it");
  }
  return absl::OkStatus();
}

absl::Status CheckCancelled(const DecomposeOptions& options) {
  if (options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed)) {
    return absl::CancelledError("decomposition interrupted");
  }
  return absl::OkStatus();
}

// One read of up to a buffer's worth of one tensor, and where it goes.
struct Chunk {
  const ManifestTensor* tensor;
  const GgufTensorInfo* source;
  uint64_t source_offset;  // into the tensor's bytes in the GGUF
  uint64_t file_offset;    // in the file being written
  uint64_t size;
};

// Cuts `bytes` of `t` at `source_offset` in the GGUF, going to `file_offset`,
// into chunks of at most `chunk_bytes`.
void AddChunks(const ManifestTensor& t, const GgufTensorInfo* source, uint64_t source_offset, uint64_t file_offset,
               uint64_t bytes, uint64_t chunk_bytes, std::vector<Chunk>& chunks) {
  for (uint64_t done = 0; done < bytes; done += chunk_bytes) {
    chunks.push_back({&t, source, source_offset + done, file_offset + done, std::min(chunk_bytes, bytes - done)});
  }
}

// Every chunk of `plan`, in file order (so the file is hashed front to
// back). A packed tensor is copied whole; a strided one (format 2's stacked
// expert tensors) slice by slice, expert e's slice to offset + e * stride.
std::vector<Chunk> PlanChunks(const GgufFile& gguf, const ManifestFile& plan, uint64_t chunk_bytes) {
  std::vector<Chunk> chunks;
  for (const ManifestTensor& t : plan.tensors) {
    const GgufTensorInfo* source = gguf.FindTensor(t.name);
    if (t.expert_stride == 0) {
      AddChunks(t, source, 0, t.offset, t.bytes, chunk_bytes, chunks);
      continue;
    }
    const uint64_t slice = t.bytes / plan.experts->count;
    for (uint64_t e = 0; e < plan.experts->count; ++e) {
      AddChunks(t, source, e * slice, t.offset + e * t.expert_stride, slice, chunk_bytes, chunks);
    }
  }
  std::sort(chunks.begin(), chunks.end(), [](const Chunk& a, const Chunk& b) { return a.file_offset < b.file_offset; });
  return chunks;
}

// The injected fault for a write to `path` (DecomposeOptions::write_fault),
// as the write itself would report it.
absl::Status CheckWriteFault(const DecomposeOptions& options, absl::string_view path, uint64_t bytes_written) {
  if (!options.write_fault) return absl::OkStatus();
  const int err = options.write_fault(path, bytes_written);
  return err == 0 ? absl::OkStatus() : ErrnoStatus(err, "cannot write", path);
}

// What writing a file hashed: the whole file, and for a format-2 MoE layer
// file its dense part and each expert block.
struct FileDigests {
  uint64_t whole = 0;
  uint64_t dense = 0;
  std::vector<uint64_t> experts;
};

// Writes one file: header page, tensors at their offsets, zero padding;
// returns its checksums. The file is sized first so padding is never written.
absl::StatusOr<FileDigests> WriteModelFile(const GgufFile& gguf, const ManifestFile& plan, const std::string& path,
                                           const DecomposeOptions& options, ChunkBuffers& buffers,
                                           uint64_t& bytes_done, uint64_t bytes_total) {
  const std::vector<Chunk> chunks = PlanChunks(gguf, plan, buffers[0].size());
  OCTO_ASSIGN_OR_RETURN(File out, File::CreateNew(path));
  OCTO_RETURN_IF_ERROR(out.Truncate(plan.size));
  SectionHasher hasher(ExpertChecksumRanges(plan));
  std::vector<uint8_t> page(kHeaderBytes);
  FileHeader header;
  header.kind = plan.kind;
  header.layer = plan.layer;
  header.tensor_count = static_cast<uint32_t>(plan.tensors.size());
  header.file_size = plan.size;
  header.format_version = options.format_version;
  EncodeFileHeader(header, page);
  OCTO_RETURN_IF_ERROR(CheckWriteFault(options, path, bytes_done));
  OCTO_RETURN_IF_ERROR(out.WriteAt(0, page));
  hasher.Update(page);
  auto read = [&](size_t k, std::span<uint8_t> buffer) -> absl::StatusOr<std::span<uint8_t>> {
    const Chunk& c = chunks[k];
    std::span<uint8_t> data = buffer.first(c.size);
    absl::Status status = gguf.ReadTensorData(*c.source, c.source_offset, data);
    if (!status.ok()) return Annotate(status, "reading tensor " + c.tensor->name);
    return data;
  };
  auto write = [&](size_t k, std::span<const uint8_t> data) -> absl::Status {
    OCTO_RETURN_IF_ERROR(CheckCancelled(options));
    const uint64_t file_offset = chunks[k].file_offset;
    hasher.UpdateZerosTo(file_offset);
    hasher.Update(data);
    OCTO_RETURN_IF_ERROR(CheckWriteFault(options, path, bytes_done));
    OCTO_RETURN_IF_ERROR(out.WriteAt(file_offset, data));
    // Keep the disk writing as we go rather than leaving the whole file to
    // the Sync() at the end.
    out.StartWriteback(file_offset, data.size());
    bytes_done += data.size();
    if (options.progress) options.progress(bytes_done, bytes_total);
    return absl::OkStatus();
  };
  OCTO_RETURN_IF_ERROR(PipelineChunks(chunks.size(), buffers, read, write));
  hasher.UpdateZerosTo(plan.size);
  OCTO_RETURN_IF_ERROR(out.Sync());
  out.DropCache();  // written and synced: keep the page cache for other work
  OCTO_RETURN_IF_ERROR(out.Close());
  FileDigests digests;
  digests.whole = hasher.Digest();
  if (plan.experts.has_value()) {
    digests.dense = hasher.SectionDigest(0);
    for (size_t e = 0; e < plan.experts->count; ++e) digests.experts.push_back(hasher.SectionDigest(1 + e));
  }
  return digests;
}

// Fails before writing anything when the output file system cannot hold
// `needed` bytes: better than dying at 90% with a full disk.
absl::Status CheckFreeSpace(const fs::path& dir, uint64_t needed) {
  struct statvfs st;
  if (::statvfs(dir.c_str(), &st) != 0) return absl::OkStatus();  // unknown: let the writes tell
  const uint64_t available = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  if (available < needed) {
    return absl::ResourceExhaustedError(absl::StrCat("not enough space in ", dir.string(), ": the model directory needs ",
                                                     needed, " bytes, ", available, " are available"));
  }
  return absl::OkStatus();
}

// Moves the finished `partial` directory to `out`, replacing an existing
// model directory atomically (exchange, then delete the old one).
absl::Status Publish(const fs::path& partial, const fs::path& out) {
  if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, out.c_str(), RENAME_NOREPLACE) == 0) {
    return SyncDir(out.parent_path().string());
  }
  if (errno != EEXIST) return ErrnoStatus(errno, "cannot rename into place", out.string());
  if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) != 0) {
    return ErrnoStatus(errno, "cannot replace", out.string());
  }
  std::error_code ec;
  fs::remove_all(partial, ec);  // now holds the old directory
  return SyncDir(out.parent_path().string());
}

}  // namespace

absl::StatusOr<Manifest> Decompose(const std::string& gguf_path, const std::string& out_dir,
                                   const DecomposeOptions& options) {
  fs::path out = fs::absolute(fs::path(out_dir).lexically_normal());
  if (out.filename().empty()) out = out.parent_path();
  OCTO_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::Open(gguf_path));
  auto planned = PlanLayerDirectory(gguf, fs::path(gguf_path).filename().string(), options.format_version);
  if (!planned.ok()) return Annotate(planned.status(), gguf_path);
  // A missing parent folder is made (only once the GGUF is known to be one Octo runs).
  std::error_code made;
  fs::create_directories(out.parent_path(), made);
  if (made || !fs::is_directory(out.parent_path())) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create the folder ", out.parent_path().string(), ": ",
                                                      made ? made.message() : "not a directory"));
  }
  OCTO_RETURN_IF_ERROR(CheckReplaceable(out, options.overwrite));
  Manifest manifest = std::move(*planned);

  RemoveStalePartials(out);
  uint64_t bytes_on_disk = 0;
  for (const ManifestFile& f : manifest.files) bytes_on_disk += f.size;
  OCTO_RETURN_IF_ERROR(CheckFreeSpace(out.parent_path(), bytes_on_disk));
  const fs::path partial = out.parent_path() / (PartialPrefix(out) + std::to_string(::getpid()));
  if (::mkdir(partial.c_str(), 0755) != 0) return ErrnoStatus(errno, "cannot create", partial.string());

  uint64_t bytes_total = 0, bytes_done = 0;
  for (const ManifestFile& f : manifest.files) {
    for (const ManifestTensor& t : f.tensors) bytes_total += t.bytes;
  }
  const uint64_t chunk_bytes = std::max<uint64_t>(options.chunk_bytes, kAlignment);
  ChunkBuffers buffers = {std::vector<uint8_t>(chunk_bytes), std::vector<uint8_t>(chunk_bytes)};
  absl::Status status;
  for (ManifestFile& f : manifest.files) {
    auto digests = WriteModelFile(gguf, f, (partial / f.name).string(), options, buffers, bytes_done, bytes_total);
    if (!digests.ok()) {
      status = Annotate(digests.status(), f.name);
      break;
    }
    f.checksum = digests->whole;
    if (f.experts.has_value()) {
      f.experts->dense_checksum = digests->dense;
      f.experts->checksums = digests->experts;
    }
  }
  // The manifest goes last: its presence marks a complete directory.
  if (status.ok()) status = CheckWriteFault(options, (partial / kManifestName).string(), bytes_done);
  if (status.ok()) status = WriteNewFile((partial / kManifestName).string(), ManifestToJson(manifest));
  if (status.ok()) status = SyncDir(partial.string());
  if (status.ok()) status = CheckCancelled(options);
  if (status.ok()) status = CheckReplaceable(out, options.overwrite);  // someone may have created it meanwhile
  if (status.ok()) status = Publish(partial, out);
  if (!status.ok()) {
    std::error_code ec;
    fs::remove_all(partial, ec);
    return status;
  }
  if (options.progress) options.progress(bytes_done, bytes_total);
  return manifest;
}

}  // namespace octo
