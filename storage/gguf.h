// GGUF reader (versions 2 and 3).
//
// Parses the header, metadata and tensor infos of a GGUF file and checks
// every count, length, dimension product and offset against the bytes
// present and against overflow. Tensor data is never read at open time:
// callers read the byte ranges they need through ReadTensorData, so opening
// a 40 GB file costs only its header.
//
// Layout (little-endian): "GGUF" u32 version, u64 tensor_count, u64 kv_count,
// kv_count x {str key, u32 value type, value}, tensor_count x {str name,
// u32 n_dims, u64 dims[n_dims] (ne0 first), u32 ggml type, u64 offset},
// padding to the alignment, then the data section; tensor offsets are
// relative to its start. A str is u64 length + bytes (no terminator).
// Version 1 used 32-bit counts and lengths and is refused.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "storage/byte_source.h"
#include "storage/ggml_type.h"
#include "storage/gguf_value.h"

namespace octo {

// Limits on hostile input. Each is checked, and exceeding it is an error
// that names the limit; real models are far inside all of them.
inline constexpr uint64_t kGgufMaxKeyBytes = 65535;              // GGUF spec
inline constexpr uint64_t kGgufMaxStringBytes = 64ull << 20;     // one string value
inline constexpr uint64_t kGgufMaxArrayElements = 1ull << 25;    // ~33M (a 256K vocab is 262144)
inline constexpr uint32_t kGgufMaxArrayDepth = 4;                // arrays of arrays
inline constexpr uint64_t kGgufMaxMetadataMemory = 1ull << 30;   // parsed metadata, in memory
inline constexpr uint64_t kGgufMaxTensorNameBytes = 256;
inline constexpr uint32_t kGgufMaxDims = 4;                       // GGML_MAX_DIMS
inline constexpr uint64_t kGgufMaxAlignment = 1ull << 20;
inline constexpr uint32_t kGgufDefaultAlignment = 32;

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] (ne0) is the row length
  GgmlTypeInfo type;
  uint64_t offset = 0;         // absolute byte offset in the file
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
};

class GgufFile {
 public:
  // Opens and parses `path`. Errors name the file and the defect.
  static absl::StatusOr<GgufFile> Open(const std::string& path);
  // Parses from any source (tests, fuzzing).
  static absl::StatusOr<GgufFile> Parse(std::unique_ptr<ByteSource> source);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return source_->size(); }
  const std::string& name() const { return source_->name(); }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  // The value for `key`, or nullptr.
  const GgufValue* Find(absl::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(absl::string_view name) const;

  // Reads out.size() bytes starting `offset` bytes into `tensor`'s data.
  absl::Status ReadTensorData(const GgufTensorInfo& tensor, uint64_t offset, std::span<uint8_t> out) const;

 private:
  GgufFile() = default;
  std::unique_ptr<ByteSource> source_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;  // name -> index in tensors_
};

}  // namespace octo
