#include "storage/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace octo {

absl::Status ErrnoStatus(int err, absl::string_view what, absl::string_view path) {
  std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  switch (err) {
    case ENOENT: return absl::NotFoundError(message);
    case EEXIST: return absl::AlreadyExistsError(message);
    case EACCES:
    case EPERM: return absl::PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT: return absl::ResourceExhaustedError(message);
    case EISDIR:
    case ENOTDIR:
    case EINVAL: return absl::InvalidArgumentError(message);
    default: return absl::InternalError(message);
  }
}

absl::StatusOr<File> File::OpenForRead(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  return File(fd, path);
}

absl::StatusOr<File> File::CreateNew(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, "cannot create", path);
  return File(fd, path);
}

File::File(File&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<uint64_t> File::Size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return ErrnoStatus(errno, "cannot stat", path_);
  return static_cast<uint64_t>(st.st_size);
}

absl::Status File::ReadAt(uint64_t offset, std::span<uint8_t> out) const {
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "cannot read", path_);
    }
    if (n == 0) {
      return absl::OutOfRangeError(absl::StrCat(path_, ": file ends at byte ", offset + done, ", needed ",
                                                out.size() - done, " more bytes"));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status File::WriteAt(uint64_t offset, std::span<const uint8_t> data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "cannot write", path_);
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status File::Truncate(uint64_t size) {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) return ErrnoStatus(errno, "cannot resize", path_);
  return absl::OkStatus();
}

absl::Status File::Sync() {
  if (::fdatasync(fd_) != 0) return ErrnoStatus(errno, "cannot sync", path_);
  return absl::OkStatus();
}

void File::StartWriteback(uint64_t offset, uint64_t length) {
  (void)::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(length), SYNC_FILE_RANGE_WRITE);
}

void File::DropCache() { (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED); }

absl::Status File::Close() {
  if (fd_ < 0) return absl::OkStatus();
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return ErrnoStatus(errno, "cannot close", path_);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, uint64_t max_bytes) {
  auto file = File::OpenForRead(path);
  if (!file.ok()) return file.status();
  auto size = file->Size();
  if (!size.ok()) return size.status();
  if (*size > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, " is ", *size, " bytes, more than the limit of ", max_bytes));
  }
  std::string data(*size, '\0');
  absl::Status status = file->ReadAt(0, {reinterpret_cast<uint8_t*>(data.data()), data.size()});
  if (!status.ok()) return status;
  return data;
}

absl::Status WriteNewFile(const std::string& path, absl::string_view data) {
  auto file = File::CreateNew(path);
  if (!file.ok()) return file.status();
  absl::Status status = file->WriteAt(0, {reinterpret_cast<const uint8_t*>(data.data()), data.size()});
  if (status.ok()) status = file->Sync();
  if (status.ok()) status = file->Close();
  return status;
}

absl::Status SyncDir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open directory", path);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus(err, "cannot sync directory", path);
  return absl::OkStatus();
}

}  // namespace octo
