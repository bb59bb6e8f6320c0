#include "storage/byte_source.h"

#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace octo {
namespace {

absl::Status CheckRange(uint64_t offset, uint64_t length, uint64_t size, const std::string& name) {
  if (offset > size || length > size - offset) {
    return absl::OutOfRangeError(absl::StrCat(name, ": read of ", length, " bytes at offset ", offset,
                                              " runs past the end (", size, " bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileSource>> FileSource::Open(const std::string& path) {
  auto file = File::OpenForRead(path);
  if (!file.ok()) return file.status();
  auto size = file->Size();
  if (!size.ok()) return size.status();
  return std::unique_ptr<FileSource>(new FileSource(std::move(*file), *size));
}

absl::Status FileSource::ReadAt(uint64_t offset, std::span<uint8_t> out) const {
  absl::Status status = CheckRange(offset, out.size(), size_, name());
  if (!status.ok()) return status;
  return file_.ReadAt(offset, out);
}

absl::Status MemorySource::ReadAt(uint64_t offset, std::span<uint8_t> out) const {
  absl::Status status = CheckRange(offset, out.size(), bytes_.size(), name_);
  if (!status.ok()) return status;
  if (!out.empty()) std::memcpy(out.data(), bytes_.data() + offset, out.size());
  return absl::OkStatus();
}

}  // namespace octo
