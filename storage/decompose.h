// Decomposition: one streaming pass that turns a GGUF into a layer
// directory (see storage/FORMAT.md).
//
// Memory is bounded by two copy buffers (one being read while the other is
// hashed and written) plus the metadata, whatever the model's size. The
// result is atomic: files are written into a hidden
// sibling directory that has no manifest until every file is on disk and
// synced, then renamed into place. A failed or interrupted run removes the
// partial directory; one killed outright leaves a hidden directory without a
// manifest, which never passes `verify` and is removed by the next run.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "storage/gguf.h"
#include "storage/manifest.h"

namespace octo {

struct DecomposeOptions {
  // Replace an existing model directory (one with a manifest.json, or empty).
  // Other existing paths are never replaced.
  bool overwrite = false;
  // Polled between chunks; when it becomes true the run stops with CANCELLED
  // and removes what it wrote.
  const std::atomic<bool>* cancel = nullptr;
  // Called on the calling thread after each chunk and once at the end.
  std::function<void(uint64_t bytes_done, uint64_t bytes_total)> progress;
  // Bytes copied per read/write (two buffers of this size are used).
  uint64_t chunk_bytes = 8ull << 20;
  // The layout to write: kFormatVersion, or 1 -- no expert blocks, every
  // file packed, as Octo wrote before format 2 (for tests of old directories).
  uint32_t format_version = kFormatVersion;
  // Fault injection, as LevelDB's test Env does it: consulted before every
  // write decompose makes (each chunk and header of a layer file, and the
  // manifest) with the file and the bytes decompose has written so far; an
  // errno it returns fails that write as the disk would (ENOSPC, EIO), 0
  // lets it through. Unset in production.
  std::function<int(absl::string_view path, uint64_t bytes_written)> write_fault;
};

// Lays out the directory for `gguf` in format kFormatVersion without writing
// anything: every file with its tensors at 4 KiB-aligned offsets (a MoE
// layer file's stacked expert tensors in per-expert blocks, see FORMAT.md),
// sizes, the tokenizer and other metadata. Checksums are left zero. Fails naming the defect when the model
// is not one Octo can run (architecture, missing or misshapen tensors).
absl::StatusOr<Manifest> PlanLayerDirectory(const GgufFile& gguf, const std::string& source_name,
                                            uint32_t format_version = kFormatVersion);

// Writes the directory for the GGUF at `gguf_path` to `out_dir`.
absl::StatusOr<Manifest> Decompose(const std::string& gguf_path, const std::string& out_dir,
                                   const DecomposeOptions& options);

}  // namespace octo
