// A seam for reading: the GGUF parser and the decomposer read through this
// interface, so tests can feed them bytes from memory (corruption and
// truncation cases, fuzzing) and production feeds them a File.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "storage/file.h"

namespace octo {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Total size in bytes; fixed for the source's lifetime.
  virtual uint64_t size() const = 0;
  // Reads exactly out.size() bytes at `offset`; OUT_OF_RANGE past the end.
  virtual absl::Status ReadAt(uint64_t offset, std::span<uint8_t> out) const = 0;
  // A name for error messages (a path, or "<memory>").
  virtual const std::string& name() const = 0;
};

// Reads a File. The size is taken once when opened.
class FileSource : public ByteSource {
 public:
  static absl::StatusOr<std::unique_ptr<FileSource>> Open(const std::string& path);
  uint64_t size() const override { return size_; }
  absl::Status ReadAt(uint64_t offset, std::span<uint8_t> out) const override;
  const std::string& name() const override { return file_.path(); }

 private:
  FileSource(File file, uint64_t size) : file_(std::move(file)), size_(size) {}
  File file_;
  uint64_t size_;
};

// Reads bytes held in memory (tests, fuzzing).
class MemorySource : public ByteSource {
 public:
  explicit MemorySource(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  uint64_t size() const override { return bytes_.size(); }
  absl::Status ReadAt(uint64_t offset, std::span<uint8_t> out) const override;
  const std::string& name() const override { return name_; }

 private:
  std::vector<uint8_t> bytes_;
  std::string name_ = "<memory>";
};

}  // namespace octo
