// The ggml tensor types Octo understands, with their block geometry.
//
// Weights keep their GGUF block encoding on disk and in memory; a tensor row
// of `n` elements is n / block_size blocks of type_size bytes each. Ids are
// ggml's (they are what a GGUF file stores).
#pragma once

#include <cstdint>
#include <span>


#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"

namespace octo {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct GgmlTypeInfo {
  GgmlType type;
  absl::string_view name;  // as llama.cpp spells it, e.g. "Q4_K"
  uint32_t block_size;    // elements per block
  uint32_t type_size;     // bytes per block
};

// Every supported type, in id order. The one table: adding a type adds a row.
std::span<const GgmlTypeInfo> AllGgmlTypes();

// The row for a raw type id from a file; NOT_FOUND/INVALID_ARGUMENT naming the id
// (and ggml's name for it, when it is a type ggml has but Octo does not read).
absl::StatusOr<GgmlTypeInfo> LookupGgmlType(uint32_t id);

// The row for a name such as "q4_k" or "Q4_K" (case-insensitive).
absl::StatusOr<GgmlTypeInfo> LookupGgmlTypeByName(absl::string_view name);

// The row for a type Octo supports (every GgmlType enumerator is one).
const GgmlTypeInfo& GgmlTypeInfoOf(GgmlType type);
inline absl::string_view GgmlTypeName(GgmlType type) { return GgmlTypeInfoOf(type).name; }

// Bytes of one row of `cols` elements; cols must be a multiple of the block size.
inline uint64_t RowBytes(GgmlType type, int64_t cols) {
  const GgmlTypeInfo& info = GgmlTypeInfoOf(type);
  return static_cast<uint64_t>(cols) / info.block_size * info.type_size;
}

// Bytes needed by a tensor of `n_elements` whose rows are `row_elements` long.
// INVALID_ARGUMENT when rows are not a whole number of blocks; OUT_OF_RANGE
// on overflow.
absl::StatusOr<uint64_t> GgmlTensorBytes(const GgmlTypeInfo& info, uint64_t row_elements,
                                         uint64_t n_elements);

}  // namespace octo
