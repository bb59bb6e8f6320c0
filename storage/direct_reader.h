// Reading one layer file whole into a ring slot, as fast as the disk allows:
// O_DIRECT (no page-cache copy, no cache pollution), the file cut into
// chunks with several reads in flight (io_uring, or threads where the
// kernel refuses it), and the XXH64 checksum computed over each chunk as
// soon as the chunks before it are in, so hashing overlaps the reads.
//
// Two seams for tests, as LevelDB's Env: LayerFileReader (the whole "read a
// file" step, which the loader calls) and ReadQueue (loader_read_queue.h,
// each positional read, which DirectReader drives), so tests inject short,
// slow and failing reads under the real retry logic.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "storage/loader_read_queue.h"

namespace octo {

inline constexpr uint64_t kDirectIoAlignment = 4096;     // buffer, offset and length of O_DIRECT reads
inline constexpr uint64_t kDefaultReadChunkBytes = 1 << 20;
inline constexpr uint32_t kMaxReadQueueDepth = 256;

struct DirectReaderOptions {
  bool direct_io = true;                          // false: through the page cache
  uint32_t queue_depth = 8;                       // reads in flight, 1..kMaxReadQueueDepth
  uint64_t chunk_bytes = kDefaultReadChunkBytes;  // one read's length, a multiple of kDirectIoAlignment
};

class LayerFileReader {
 public:
  virtual ~LayerFileReader() = default;

  // Reads the file at `path`, which must be exactly `size` bytes, into
  // dest[0, size) and returns the XXH64 (seed 0) of those bytes. `dest` is
  // at least `size` bytes; for direct reads it and `size` are 4 KiB aligned
  // (ring slots and layer files are). Errors name the path: NOT_FOUND when
  // it is missing; DATA_LOSS when its size differs from `size` or it ends
  // early; the errno's code (ErrnoStatus) for a failed read. When it
  // returns, no read into `dest` is still running, error or not.
  virtual absl::StatusOr<uint64_t> ReadFile(const std::string& path, uint64_t size, std::span<uint8_t> dest) = 0;

  // Reads bytes [offset, offset + dest.size()) of the file at `path`, which
  // must be exactly `file_size` bytes, into dest, and returns their XXH64:
  // one expert's block of a format-2 layer file. Errors as ReadFile's, and
  // INVALID_ARGUMENT for a range outside the file.
  virtual absl::StatusOr<uint64_t> ReadRange(const std::string& path, uint64_t file_size, uint64_t offset,
                                             std::span<uint8_t> dest) = 0;

  // How reads are done, e.g. "io_uring+direct", "threads+buffered".
  virtual std::string io_mode() const = 0;

  // Called once with one of the files before the first ReadFile, so a
  // reader can learn what the file system allows. Errors are advice only.
  virtual absl::Status Probe(const std::string& path) { return absl::OkStatus(); }
};

class DirectReader : public LayerFileReader {
 public:
  // INVALID_ARGUMENT for a bad depth or chunk size. `queue` null: io_uring
  // if the kernel allows it, else threads (MakeBestReadQueue).
  static absl::StatusOr<std::unique_ptr<DirectReader>> Create(const DirectReaderOptions& options,
                                                              std::unique_ptr<ReadQueue> queue = nullptr);

  // Opens `path` with O_DIRECT and reads its first page, to learn whether the
  // file system takes direct reads (tmpfs and some FUSE file systems refuse
  // with EINVAL); if it refuses, this reader reads through the page cache
  // from now on and io_mode() says so. Other errors are returned.
  absl::Status Probe(const std::string& path) override;

  absl::StatusOr<uint64_t> ReadFile(const std::string& path, uint64_t size, std::span<uint8_t> dest) override;
  absl::StatusOr<uint64_t> ReadRange(const std::string& path, uint64_t file_size, uint64_t offset,
                                     std::span<uint8_t> dest) override;
  std::string io_mode() const override;

  // True while reads still use O_DIRECT.
  bool direct() const { return direct_; }

 private:
  DirectReader(const DirectReaderOptions& options, std::unique_ptr<ReadQueue> queue);
  // One attempt; *refused is set when O_DIRECT was refused mid-file.
  absl::StatusOr<uint64_t> ReadOnce(const std::string& path, uint64_t file_size, uint64_t offset,
                                    std::span<uint8_t> dest, bool* refused);

  DirectReaderOptions options_;
  std::unique_ptr<ReadQueue> queue_;
  bool direct_;
};

}  // namespace octo
