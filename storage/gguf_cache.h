// GGUF files served directly. octod (`--model x.gguf`, a GGUF under the
// models root, `octo-ctl load x.gguf`) decomposes a GGUF into a folder of the
// cache directory on first use, and reuses that folder while the file is
// unchanged: same size, same modification time, same header checksum.
//
// An entry is "<cache_dir>/<stem>-<16 hex digits>": 8 of the GGUF's absolute
// path, 8 of its fingerprint. A changed file gets a new entry and its older
// entries are removed once the new one is complete. Entries are written
// atomically (decompose.h), so a killed run never leaves one that is reused;
// a lock file per entry keeps two processes from decomposing the same file
// at once.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "storage/decompose.h"

namespace octo {

// The bytes of a GGUF's start the header checksum covers (its magic, counts
// and first metadata: a rewritten file almost always differs there).
inline constexpr uint64_t kGgufHeaderHashBytes = 1 << 20;

struct GgufFingerprint {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t header_hash = 0;  // xxhash64 of the first kGgufHeaderHashBytes
};

absl::StatusOr<GgufFingerprint> FingerprintGguf(const std::string& path);

// The entry folder for the GGUF at absolute path `gguf` with `fingerprint`.
std::string GgufCacheEntry(const std::string& cache_dir, const std::string& gguf,
                           const GgufFingerprint& fingerprint);

struct CachedModel {
  std::string dir;      // the layer directory (manifest.json inside)
  bool reused = false;  // false: decomposed by this call
};

// The layer directory for the GGUF at `gguf_path`: its cache entry when one
// is complete, else decomposed into it now (options.progress and
// options.cancel apply; options.overwrite is ignored). Creates `cache_dir`
// when missing. Errors name the GGUF or the cache folder.
absl::StatusOr<CachedModel> DecomposeIntoCache(const std::string& gguf_path, const std::string& cache_dir,
                                               const DecomposeOptions& options);

}  // namespace octo
