// A GGUF v3 writer for tests and benchmarks, and random-but-valid tensor data.
//
// File layout (all little-endian), as ggml's gguf.cpp reads it:
//   "GGUF" | u32 version = 3 | u64 tensor_count | u64 kv_count
//   kv_count × { string key | u32 value_type | value }
//   tensor_count × { string name | u32 n_dims | u64 dims[n_dims] (ne0 first)
//                    | u32 ggml_type | u64 offset (relative to the data section) }
//   zero padding to `alignment` | data section
// A string is u64 length + bytes (no terminator); an array value is
// u32 element type | u64 count | elements. Every tensor starts at a multiple of
// `alignment` inside the data section and is followed by zero padding to the
// next multiple (the last one too), so the file size is
// align(header) + align(end of last tensor).
//
// The writer never holds tensor data: WriteFile asks a TensorFiller for each
// tensor's bytes in chunks of at most kGgufFillChunkBytes, so writing a 40 GB
// model needs a few MiB of memory. Metadata and tensor infos are kept
// serialized in memory (a 152k-token vocabulary is ~3 MB).
#pragma once

#include <bit>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/ggml_type.h"
#include "storage/gguf.h"

namespace octo::testing {

static_assert(std::endian::native == std::endian::little, "the GGUF writer assumes a little-endian host");

inline constexpr uint32_t kGgufVersion = 3;
// Upper bound on one TensorFiller call, and so on the writer's data buffer.
inline constexpr uint64_t kGgufFillChunkBytes = 8ull << 20;

// Value types and the format limits are the reader's (storage/gguf.h), so
// the two cannot disagree.
using ::octo::GgufValueType;

// One tensor as the writer will lay it out.
struct GgufTensorEntry {
  std::string name;
  GgmlTypeInfo type;
  std::vector<uint64_t> dims;  // ne0 (the row length) first
  uint64_t n_bytes = 0;        // GgmlTensorBytes of the tensor
  uint64_t offset = 0;         // from the start of the data section, aligned
};

// Produces bytes [offset, offset + out.size()) of tensor `index` (an index
// into GgufWriter::tensors()). Calls for one tensor come in increasing
// offset order, tensors in index order; `offset` and `out.size()` are whole
// blocks of the tensor's type and out.size() <= kGgufFillChunkBytes. A non-OK
// Status aborts the write.
using TensorFiller =
    std::function<absl::Status(size_t index, uint64_t offset, std::span<uint8_t> out)>;

// Called after each chunk with the bytes written so far and the file size.
using WriteProgress = std::function<void(uint64_t bytes_written, uint64_t total_bytes)>;

// Collects metadata and tensor infos, then streams a file. Not thread-safe;
// WriteFile may be called any number of times (e.g. to several paths).
//
// Add* calls never fail on the spot: the first defect (a repeated key, or a
// "general.alignment" that disagrees with the writer's alignment) is
// remembered and returned by AddTensor, HeaderBytes and WriteFile.
class GgufWriter {
 public:
  // `alignment` must be a power of two <= kGgufMaxAlignment (else every later
  // call fails with INVALID_ARGUMENT). When it is not 32 and no KV named
  // "general.alignment" was added, the writer appends one (u32) after the
  // others. AddU32("general.alignment", v) with v != alignment is a defect.
  explicit GgufWriter(uint32_t alignment = kGgufDefaultAlignment);

  // Scalar KVs, written in insertion order.
  void AddU8(absl::string_view key, uint8_t value);
  void AddI8(absl::string_view key, int8_t value);
  void AddU16(absl::string_view key, uint16_t value);
  void AddI16(absl::string_view key, int16_t value);
  void AddU32(absl::string_view key, uint32_t value);
  void AddI32(absl::string_view key, int32_t value);
  void AddF32(absl::string_view key, float value);
  void AddBool(absl::string_view key, bool value);
  void AddString(absl::string_view key, absl::string_view value);
  void AddU64(absl::string_view key, uint64_t value);
  void AddI64(absl::string_view key, int64_t value);
  void AddF64(absl::string_view key, double value);

  // Array KVs.
  void AddStringArray(absl::string_view key, std::span<const std::string> values);
  void AddF32Array(absl::string_view key, std::span<const float> values);
  void AddI32Array(absl::string_view key, std::span<const int32_t> values);
  void AddU32Array(absl::string_view key, std::span<const uint32_t> values);

  // Escape hatch for parser tests: a KV whose value bytes (everything after
  // the u32 type) are given verbatim, well-formed or not. Not checked against
  // the writer's alignment even for "general.alignment" (which it then
  // no longer appends).
  void AddRawKv(absl::string_view key, GgufValueType type, absl::string_view value_bytes);

  // Declares a tensor; its data comes from the filler at WriteFile time.
  // INVALID_ARGUMENT naming the tensor when: the name repeats, dims is empty
  // or longer than kGgufMaxDims, a dim is 0, or dims[0] is not a whole number
  // of the type's blocks; OUT_OF_RANGE when its size overflows.
  absl::Status AddTensor(absl::string_view name, GgmlType type, std::span<const uint64_t> dims);

  // Everything before the data section, padding included.
  absl::StatusOr<std::string> HeaderBytes() const;
  // align(header) + data section size; what WriteFile produces.
  absl::StatusOr<uint64_t> FileSize() const;
  // Bytes of the data section (sum of aligned tensor sizes).
  uint64_t DataSize() const { return data_size_; }

  const std::vector<GgufTensorEntry>& tensors() const { return tensors_; }
  uint64_t kv_count() const { return kv_count_ + (ImplicitAlignmentKv() ? 1 : 0); }
  uint32_t alignment() const { return alignment_; }

  // Writes the file to `path + ".tmp"` and renames it to `path` only once
  // complete, so an interrupted run never leaves a complete-looking file
  // (the .tmp is removed on failure). Errors: the recorded Add* defect, the
  // filler's Status (annotated with the tensor name), or an errno-based Status
  // naming the path.
  absl::Status WriteFile(const std::string& path, const TensorFiller& fill,
                         const WriteProgress& progress = nullptr) const;

 private:
  void BeginKv(absl::string_view key, GgufValueType type);
  template <typename T>
  void AddScalar(absl::string_view key, GgufValueType type, T value);
  template <typename T>
  void AddArray(absl::string_view key, GgufValueType elem_type, std::span<const T> values);
  bool ImplicitAlignmentKv() const { return alignment_ != kGgufDefaultAlignment && !alignment_key_seen_; }

  uint32_t alignment_;
  absl::Status status_;  // first defect found by an Add* call
  std::string kv_bytes_;
  uint64_t kv_count_ = 0;
  absl::flat_hash_set<std::string> keys_;
  bool alignment_key_seen_ = false;
  std::vector<GgufTensorEntry> tensors_;
  absl::flat_hash_set<std::string> tensor_names_;
  uint64_t data_size_ = 0;
};

// xoshiro256** seeded through splitmix64: fast (~1 ns per 64 bits), and the
// same seed gives the same stream on every machine.
class Rng {
 public:
  explicit Rng(uint64_t seed, uint64_t stream = 0);
  uint64_t Next() {
    const uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = std::rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1).
  float Uniform() { return static_cast<float>(Next() >> 40) * 0x1.0p-24f; }
  // Uniform in [lo, hi).
  float Uniform(float lo, float hi) { return lo + (hi - lo) * Uniform(); }
  // Mean 0, standard deviation 1, bounded by ±2√3 (sum of four uniforms):
  // bell-shaped, never NaN or Inf.
  float Normalish();
  // Fills `out` with uniformly random bytes.
  void FillBytes(std::span<uint8_t> out);

 private:
  uint64_t s_[4];
};

// IEEE half <-> float (round to nearest even; subnormals kept).
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t bits);
// bfloat16 (round to nearest even; the input must not be NaN).
uint16_t FloatToBf16(float value);
float Bf16ToFloat(uint16_t bits);

// Standard deviation of the values FillRandomBlocks writes for F32/F16/BF16.
inline constexpr float kRandomWeightStd = 0.02f;

// Fills `out` (a whole number of `type` blocks, else INVALID_ARGUMENT) with
// valid random blocks. Quant bytes and packed sub-block scales are uniformly
// random. Every fp16 scale (d, dmin, m) is finite, non-zero and |v| < 0.1: its
// range is chosen per type so that decoded weights have a standard deviation
// of roughly 0.01-0.04, like real checkpoints (so Q6_K/IQ4_XS get d ~1e-5, a
// subnormal half, as real files do). F32/F16/BF16 get Normalish() *
// kRandomWeightStd. Never NaN or Inf.
absl::Status FillRandomBlocks(const GgmlTypeInfo& type, std::span<uint8_t> out, Rng& rng);

}  // namespace octo::testing
