#include "storage/direct_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "storage/file.h"
#include "storage/status_macros.h"
#include "storage/xxhash64.h"

namespace octo {
namespace {

class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

bool Aligned(uint64_t n) { return n % kDirectIoAlignment == 0; }

// The smallest read a range is cut into (see ReadOnce).
constexpr uint64_t kMinRangeChunkBytes = 128 * 1024;

// Opens `path` read-only; with O_DIRECT when `direct`. -errno on failure.
int OpenFile(const std::string& path, bool direct) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
  } while (fd < 0 && errno == EINTR);
  return fd >= 0 ? fd : -errno;
}

// The reads of one file, cut into chunks kept `depth` in flight.
class ChunkedRead {
 public:
  // Reads file bytes [base, base + size) into dest[0, size).
  ChunkedRead(ReadQueue& queue, const std::string& path, uint64_t base, uint64_t size, uint64_t chunk_bytes,
              std::span<uint8_t> dest)
      : queue_(queue), path_(path), base_(base), size_(size), chunk_bytes_(chunk_bytes), dest_(dest),
        filled_((size + chunk_bytes - 1) / chunk_bytes, 0) {}

  // Reads everything through `fd` (direct when `direct`). Sets *refused when
  // the file system refused an O_DIRECT read (EINVAL): the caller reads the
  // whole file again through the cache.
  absl::StatusOr<uint64_t> Run(int fd, bool direct, bool* refused) {
    fd_ = fd;
    direct_ = direct;
    absl::Status error;
    uint32_t in_flight = 0;
    uint64_t next_chunk = 0;
    while (true) {
      while (error.ok() && in_flight < queue_.depth() && next_chunk < filled_.size()) {
        error = SubmitRest(next_chunk++);
        if (error.ok()) ++in_flight;
      }
      if (in_flight == 0) break;
      OCTO_ASSIGN_OR_RETURN(ReadQueue::Completion done, queue_.Wait());
      --in_flight;
      if (!error.ok()) continue;  // draining: nothing may still write into dest
      error = OnCompletion(done, refused);
      if (error.ok() && filled_[done.tag] < ChunkLength(done.tag)) {
        error = SubmitRest(done.tag);  // short read (or EINTR): ask for the rest
        if (error.ok()) ++in_flight;
      }
    }
    OCTO_RETURN_IF_ERROR(error);
    return hasher_.Digest();
  }

 private:
  uint64_t ChunkLength(uint64_t c) const { return std::min(chunk_bytes_, size_ - c * chunk_bytes_); }

  absl::Status SubmitRest(uint64_t c) {
    const uint64_t offset = c * chunk_bytes_ + filled_[c];
    std::span<uint8_t> rest = dest_.subspan(offset, ChunkLength(c) - filled_[c]);
    int fd = fd_;
    // A short direct read can leave the rest unaligned; read that through the cache.
    if (direct_ && !(Aligned(offset) && Aligned(rest.size()))) {
      if (buffered_fd_.get() < 0) {
        const int opened = OpenFile(path_, /*direct=*/false);
        if (opened < 0) return ErrnoStatus(-opened, "cannot open", path_);
        buffered_fd_.reset(opened);
      }
      fd = buffered_fd_.get();
    }
    return queue_.Submit(fd, base_ + offset, rest, c);
  }

  absl::Status OnCompletion(const ReadQueue::Completion& done, bool* refused) {
    const uint64_t c = done.tag;
    if (c >= filled_.size()) return absl::InternalError(absl::StrCat("read queue returned unknown tag ", c));
    const uint64_t offset = base_ + c * chunk_bytes_ + filled_[c];
    if (done.result == -EINTR || done.result == -EAGAIN) return absl::OkStatus();
    if (done.result == -EINVAL && direct_) {
      *refused = true;
      return absl::FailedPreconditionError(absl::StrCat(path_, ": O_DIRECT read refused"));
    }
    if (done.result < 0) {
      return ErrnoStatus(static_cast<int>(-done.result), absl::StrCat("cannot read (at byte ", offset, ")"), path_);
    }
    if (done.result == 0) {
      return absl::DataLossError(absl::StrCat(path_, ": file ends at byte ", offset, ", expected ", size_,
                                              " bytes (truncated while being read?)"));
    }
    filled_[c] += std::min<uint64_t>(static_cast<uint64_t>(done.result), ChunkLength(c) - filled_[c]);
    // Hash every chunk that is complete and has all chunks before it complete.
    while (next_hash_ < filled_.size() && filled_[next_hash_] == ChunkLength(next_hash_)) {
      hasher_.Update(dest_.subspan(next_hash_ * chunk_bytes_, ChunkLength(next_hash_)));
      ++next_hash_;
    }
    return absl::OkStatus();
  }

  ReadQueue& queue_;
  const std::string& path_;
  const uint64_t base_;
  const uint64_t size_;
  const uint64_t chunk_bytes_;
  std::span<uint8_t> dest_;
  std::vector<uint64_t> filled_;  // bytes in so far, per chunk
  int fd_ = -1;
  bool direct_ = false;
  ScopedFd buffered_fd_;
  Xxh64 hasher_;
  uint64_t next_hash_ = 0;  // first chunk not yet hashed
};

}  // namespace

absl::StatusOr<std::unique_ptr<DirectReader>> DirectReader::Create(const DirectReaderOptions& options,
                                                                   std::unique_ptr<ReadQueue> queue) {
  if (options.queue_depth < 1 || options.queue_depth > kMaxReadQueueDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue depth ", options.queue_depth, " is outside 1..", kMaxReadQueueDepth));
  }
  if (options.chunk_bytes == 0 || !Aligned(options.chunk_bytes) || options.chunk_bytes > (1u << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("read chunk ", options.chunk_bytes,
                                                   " bytes must be a non-zero multiple of 4096 up to 1 GiB"));
  }
  if (queue == nullptr) queue = MakeBestReadQueue(options.queue_depth);
  return std::unique_ptr<DirectReader>(new DirectReader(options, std::move(queue)));
}

DirectReader::DirectReader(const DirectReaderOptions& options, std::unique_ptr<ReadQueue> queue)
    : options_(options), queue_(std::move(queue)), direct_(options.direct_io) {}

std::string DirectReader::io_mode() const { return absl::StrCat(queue_->name(), direct_ ? "+direct" : "+buffered"); }

absl::Status DirectReader::Probe(const std::string& path) {
  if (!direct_) return absl::OkStatus();
  const int opened = OpenFile(path, /*direct=*/true);
  if (opened == -EINVAL) {
    direct_ = false;
    return absl::OkStatus();
  }
  if (opened < 0) return ErrnoStatus(-opened, "cannot open", path);
  ScopedFd fd(opened);
  void* page = nullptr;
  if (::posix_memalign(&page, kDirectIoAlignment, kDirectIoAlignment) != 0) {
    return absl::ResourceExhaustedError("cannot allocate a page to probe O_DIRECT");
  }
  ssize_t n;
  do {
    n = ::pread(fd.get(), page, kDirectIoAlignment, 0);
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  std::free(page);
  if (n < 0 && err == EINVAL) {
    direct_ = false;
    return absl::OkStatus();
  }
  if (n < 0) return ErrnoStatus(err, "cannot read", path);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> DirectReader::ReadFile(const std::string& path, uint64_t size, std::span<uint8_t> dest) {
  if (dest.size() < size) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is ", size, " bytes, larger than the ", dest.size(), "-byte buffer"));
  }
  return ReadRange(path, size, 0, dest.first(size));
}

absl::StatusOr<uint64_t> DirectReader::ReadRange(const std::string& path, uint64_t file_size, uint64_t offset,
                                                 std::span<uint8_t> dest) {
  if (offset > file_size || dest.size() > file_size - offset) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": bytes [", offset, ", ", offset + dest.size(),
                                                   ") are outside its ", file_size, " bytes"));
  }
  bool refused = false;
  absl::StatusOr<uint64_t> digest = ReadOnce(path, file_size, offset, dest, &refused);
  if (refused) {
    direct_ = false;  // the file system takes no O_DIRECT; every file here is on it
    digest = ReadOnce(path, file_size, offset, dest, &refused);
  }
  return digest;
}

absl::StatusOr<uint64_t> DirectReader::ReadOnce(const std::string& path, uint64_t file_size, uint64_t offset,
                                                std::span<uint8_t> dest, bool* refused) {
  const uint64_t size = dest.size();
  // Direct reads need an aligned buffer, offset and length; anything else
  // goes through the cache (never the case for ring slots and layer files).
  bool direct = direct_ && Aligned(reinterpret_cast<uintptr_t>(dest.data())) && Aligned(offset) && Aligned(size);
  int opened = OpenFile(path, direct);
  if (opened == -EINVAL && direct) {
    *refused = true;
    return absl::FailedPreconditionError(absl::StrCat(path, ": O_DIRECT open refused"));
  }
  if (opened < 0) return ErrnoStatus(-opened, "cannot open", path);
  ScopedFd fd(opened);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, "cannot stat", path);
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  if (static_cast<uint64_t>(st.st_size) != file_size) {
    return absl::DataLossError(absl::StrCat(path, " is ", st.st_size, " bytes; the manifest says ", file_size));
  }
  if (size == 0) return Xxh64Hash({});
  // A small range (one expert's block) in chunks small enough to keep the
  // queue full: a 2.6 MB block in 1 MiB chunks would have 3 reads in flight.
  const uint64_t fill_queue = (size / queue_->depth() + kDirectIoAlignment - 1) / kDirectIoAlignment * kDirectIoAlignment;
  const uint64_t chunk = std::min(options_.chunk_bytes, std::max(kMinRangeChunkBytes, fill_queue));
  ChunkedRead read(*queue_, path, offset, size, chunk, dest);
  return read.Run(fd.get(), direct, refused);
}

}  // namespace octo
