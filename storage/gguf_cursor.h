// Sequential, buffered, bounds-checked reads over a ByteSource: the GGUF
// parser's only way to touch bytes. Every read checks the bytes left first,
// so a hostile length fails with a message instead of an allocation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "storage/byte_source.h"

namespace octo {

class GgufCursor {
 public:
  explicit GgufCursor(const ByteSource& source) : source_(source) {}

  uint64_t position() const { return pos_; }
  uint64_t remaining() const { return source_.size() - pos_; }

  // Copies n bytes to `out` and advances. OUT_OF_RANGE, naming `what`, when
  // fewer than n bytes are left.
  absl::Status Read(void* out, uint64_t n, absl::string_view what);
  absl::StatusOr<uint32_t> ReadU32(absl::string_view what);
  absl::StatusOr<uint64_t> ReadU64(absl::string_view what);
  // A GGUF string (u64 length + bytes), refused above `max_bytes`.
  absl::StatusOr<std::string> ReadString(uint64_t max_bytes, absl::string_view what);

 private:
  absl::Status Fill(uint64_t n, absl::string_view what);

  static constexpr uint64_t kBufferBytes = 1 << 20;
  const ByteSource& source_;
  uint64_t pos_ = 0;            // logical position
  std::vector<uint8_t> buf_;    // bytes [buf_start_, buf_start_ + buf_.size())
  uint64_t buf_start_ = 0;
};

}  // namespace octo
