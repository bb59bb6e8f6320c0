// The types a KV cache may hold (kernels/kv_blocks.h encodes and decodes
// them), and the check that a model's rows fit one.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "storage/ggml_type.h"

namespace octo {

// The cache types, for messages and flags (llama.cpp's --cache-type-k names).
inline constexpr const char* kKvCacheTypeNames = "f16, q8_0, q4_0, q4_1";

inline constexpr bool IsKvCacheType(GgmlType type) {
  return type == GgmlType::kF16 || type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1;
}

// "f16", "q8_0", ...: the name a flag takes; "?" for a type that is none.
inline absl::string_view KvCacheTypeName(GgmlType type) {
  switch (type) {
    case GgmlType::kF16: return "f16";
    case GgmlType::kQ8_0: return "q8_0";
    case GgmlType::kQ4_0: return "q4_0";
    case GgmlType::kQ4_1: return "q4_1";
    default: return "?";
  }
}

// A flag's or field's value (any case); INVALID_ARGUMENT naming `what` and
// the types there are.
inline absl::StatusOr<GgmlType> ParseKvCacheType(absl::string_view what, absl::string_view name) {
  for (GgmlType type : {GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1}) {
    if (absl::EqualsIgnoreCase(name, KvCacheTypeName(type))) return type;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": '", name, "' is not a KV cache type (", kKvCacheTypeNames, ")"));
}

// The keys' and values' types of one cache.
struct KvCacheTypes {
  GgmlType k = GgmlType::kF16;
  GgmlType v = GgmlType::kF16;
  friend bool operator==(const KvCacheTypes&, const KvCacheTypes&) = default;
};

// OK when a row of `row_elements` values can be stored as `type`; else
// INVALID_ARGUMENT naming `what` ("cache-type-k") and why.
inline absl::Status KvRowCheck(absl::string_view what, GgmlType type, int64_t row_elements) {
  if (!IsKvCacheType(type)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", GgmlTypeName(type),
                                                   " is not a KV cache type (", kKvCacheTypeNames, ")"));
  }
  const uint32_t block = GgmlTypeInfoOf(type).block_size;
  if (row_elements <= 0 || row_elements % block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": a ", KvCacheTypeName(type), " cache needs rows of a multiple of ",
                                                   block, " values; this model's are ", row_elements,
                                                   " (n_kv_heads * head_dim); use f16"));
  }
  return absl::OkStatus();
}

}  // namespace octo
