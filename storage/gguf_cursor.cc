#include "storage/gguf_cursor.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "storage/byte_order.h"

namespace octo {

absl::Status GgufCursor::Fill(uint64_t n, absl::string_view what) {
  if (n > remaining()) {
    return absl::OutOfRangeError(absl::StrCat("truncated: ", what, " needs ", n, " bytes at offset ", pos_,
                                              " but the file ends at ", source_.size()));
  }
  if (pos_ >= buf_start_ && pos_ + n <= buf_start_ + buf_.size()) return absl::OkStatus();
  const uint64_t want = std::min<uint64_t>(std::max<uint64_t>(n, kBufferBytes), remaining());
  buf_.resize(want);
  buf_start_ = pos_;
  return source_.ReadAt(pos_, buf_);
}

absl::Status GgufCursor::Read(void* out, uint64_t n, absl::string_view what) {
  // Large reads (long strings) go straight through without growing the buffer.
  if (n > kBufferBytes) {
    if (n > remaining()) return Fill(n, what);
    absl::Status status = source_.ReadAt(pos_, {static_cast<uint8_t*>(out), n});
    if (!status.ok()) return status;
    pos_ += n;
    return absl::OkStatus();
  }
  absl::Status status = Fill(n, what);
  if (!status.ok()) return status;
  if (n > 0) std::memcpy(out, buf_.data() + (pos_ - buf_start_), n);
  pos_ += n;
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> GgufCursor::ReadU32(absl::string_view what) {
  uint8_t b[4];
  absl::Status status = Read(b, 4, what);
  if (!status.ok()) return status;
  return LoadLE<uint32_t>(b);
}

absl::StatusOr<uint64_t> GgufCursor::ReadU64(absl::string_view what) {
  uint8_t b[8];
  absl::Status status = Read(b, 8, what);
  if (!status.ok()) return status;
  return LoadLE<uint64_t>(b);
}

absl::StatusOr<std::string> GgufCursor::ReadString(uint64_t max_bytes, absl::string_view what) {
  auto length = ReadU64(absl::StrCat(what, " length"));
  if (!length.ok()) return length.status();
  if (*length > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", *length, " bytes long, over the limit of ",
                                                   max_bytes, " (at offset ", pos_ - 8, ")"));
  }
  if (*length > remaining()) {
    return absl::OutOfRangeError(absl::StrCat("truncated: ", what, " of ", *length, " bytes at offset ", pos_,
                                              " runs past the end of the file (", source_.size(), " bytes)"));
  }
  std::string s(*length, '\0');
  absl::Status status = Read(s.data(), *length, what);
  if (!status.ok()) return status;
  return s;
}

}  // namespace octo
