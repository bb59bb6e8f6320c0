#include "storage/gguf_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "storage/file.h"
#include "storage/format.h"
#include "storage/manifest.h"
#include "storage/status_macros.h"
#include "storage/xxhash64.h"

namespace octo {
namespace fs = std::filesystem;
namespace {

uint64_t HashText(const std::string& text) {
  return Xxh64Hash(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

// "<stem>-<8 hex of the path>": every entry of one GGUF starts so.
std::string EntryPrefix(const std::string& gguf) {
  return absl::StrFormat("%s-%08x", fs::path(gguf).stem().string(), HashText(gguf) & 0xffffffffu);
}

// An exclusive lock on "<cache_dir>/.<entry>.lock", released on destruction.
class EntryLock {
 public:
  static absl::StatusOr<EntryLock> Take(const fs::path& entry) {
    const fs::path path = entry.parent_path() / ("." + entry.filename().string() + ".lock");
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoStatus(errno, "cannot create the cache lock", path.string());
    if (::flock(fd, LOCK_EX) != 0) {
      const int err = errno;
      ::close(fd);
      return ErrnoStatus(err, "cannot lock", path.string());
    }
    return EntryLock(fd);
  }
  EntryLock(EntryLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  EntryLock(const EntryLock&) = delete;
  ~EntryLock() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  explicit EntryLock(int fd) : fd_(fd) {}
  int fd_;
};

bool Complete(const fs::path& entry) {
  std::error_code ec;
  return fs::is_regular_file(entry / kManifestName, ec);
}

// A complete entry this build can read. One it cannot (made by another
// version of Octo: an older one that lacked a type or tensor this one
// needs, or a newer one) is decomposed again.
bool Usable(const fs::path& entry) { return Complete(entry) && ReadManifest(entry.string()).ok(); }

// Removes the entries of the same GGUF other than `keep` (older versions of
// the file), and their lock files.
void RemoveOlderEntries(const fs::path& cache, const std::string& prefix, const fs::path& keep) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const fs::directory_entry& e : fs::directory_iterator(cache, ec)) {
    const std::string name = e.path().filename().string();
    if (e.path() != keep && absl::StartsWith(name, prefix + "-") && name.size() == prefix.size() + 9) {
      stale.push_back(e.path());
    }
  }
  for (const fs::path& p : stale) {
    fs::remove_all(p, ec);
    fs::remove(cache / ("." + p.filename().string() + ".lock"), ec);
  }
}

}  // namespace

absl::StatusOr<GgufFingerprint> FingerprintGguf(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(err, "cannot stat", path);
  }
  GgufFingerprint f;
  f.size = static_cast<uint64_t>(st.st_size);
  f.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  std::vector<uint8_t> head(std::min<uint64_t>(f.size, kGgufHeaderHashBytes));
  size_t got = 0;
  while (got < head.size()) {
    const ssize_t n = ::pread(fd, head.data() + got, head.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      return ErrnoStatus(err, "cannot read the header of", path);
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  f.header_hash = Xxh64Hash(head);
  return f;
}

std::string GgufCacheEntry(const std::string& cache_dir, const std::string& gguf,
                           const GgufFingerprint& fingerprint) {
  const uint64_t id = HashText(absl::StrCat(fingerprint.size, "/", fingerprint.mtime_ns, "/",
                                            fingerprint.header_hash));
  return (fs::path(cache_dir) / absl::StrFormat("%s-%08x", EntryPrefix(gguf), id & 0xffffffffu)).string();
}

absl::StatusOr<CachedModel> DecomposeIntoCache(const std::string& gguf_path, const std::string& cache_dir,
                                               const DecomposeOptions& options) {
  std::error_code ec;
  const fs::path gguf = fs::canonical(gguf_path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("no GGUF file ", gguf_path, ": ", ec.message()));
  OCTO_ASSIGN_OR_RETURN(const GgufFingerprint fingerprint, FingerprintGguf(gguf.string()));
  fs::create_directories(cache_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create the cache folder ", cache_dir, ": ", ec.message(), " (set --cache-dir)"));
  }
  const fs::path entry = GgufCacheEntry(cache_dir, gguf.string(), fingerprint);
  if (Usable(entry)) return CachedModel{entry.string(), true};
  OCTO_ASSIGN_OR_RETURN(EntryLock lock, EntryLock::Take(entry));
  if (Usable(entry)) return CachedModel{entry.string(), true};  // another process made it meanwhile
  DecomposeOptions decompose = options;
  decompose.overwrite = true;  // a leftover folder without a manifest, or one this build cannot read
  absl::StatusOr<Manifest> made = Decompose(gguf.string(), entry.string(), decompose);
  if (!made.ok()) {
    return absl::Status(made.status().code(), absl::StrCat("decomposing ", gguf.string(), " into the cache ",
                                                           cache_dir, ": ", made.status().message()));
  }
  RemoveOlderEntries(cache_dir, EntryPrefix(gguf.string()), entry);
  return CachedModel{entry.string(), false};
}

}  // namespace octo
