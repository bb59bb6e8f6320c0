// RAII file descriptors with Status-returning positional I/O. Everything the
// storage layer reads or writes goes through here, so every short read and
// errno turns into a Status that names the path.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"

namespace octo {

class File {
 public:
  // Opens `path` read-only.
  static absl::StatusOr<File> OpenForRead(const std::string& path);
  // Creates `path` for writing (mode 0644); fails if it exists.
  static absl::StatusOr<File> CreateNew(const std::string& path);

  File() = default;
  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  // Size in bytes (fstat).
  absl::StatusOr<uint64_t> Size() const;
  // Reads exactly out.size() bytes at `offset`; OUT_OF_RANGE if the file ends first.
  absl::Status ReadAt(uint64_t offset, std::span<uint8_t> out) const;
  // Writes all of `data` at `offset`.
  absl::Status WriteAt(uint64_t offset, std::span<const uint8_t> data);
  // Sets the file's size (new bytes read as zero).
  absl::Status Truncate(uint64_t size);
  // Starts writing [offset, offset + length) back to disk without waiting
  // (sync_file_range), so a later Sync() has little left to do. Advice only.
  void StartWriteback(uint64_t offset, uint64_t length);
  // fdatasync.
  absl::Status Sync();
  // Drops this file's pages from the page cache (advice only; errors ignored).
  void DropCache();
  absl::Status Close();

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

 private:
  File(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

// Reads a whole (small) file, e.g. a manifest. Refuses files above `max_bytes`.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, uint64_t max_bytes);

// Writes `data` to `path` (new file), fsyncs it.
absl::Status WriteNewFile(const std::string& path, absl::string_view data);

// fsync on a directory, so renames and creations in it are durable.
absl::Status SyncDir(const std::string& path);

// An errno as a Status: code chosen from the errno (NOT_FOUND for ENOENT,
// PERMISSION_DENIED for EACCES, ...), message "`what` `path`: strerror".
absl::Status ErrnoStatus(int err, absl::string_view what, absl::string_view path);

}  // namespace octo
