#include "storage/ggml_type.h"

#include <cstdio>
#include <cstdlib>

#include <array>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace octo {
namespace {

// Block geometry from the ggml block structs (fp16 scales, packed quants).
constexpr std::array<GgmlTypeInfo, 25> kTypes = {{
    {GgmlType::kF32, "F32", 1, 4},
    {GgmlType::kF16, "F16", 1, 2},
    {GgmlType::kQ4_0, "Q4_0", 32, 18},     // d, qs[16]
    {GgmlType::kQ4_1, "Q4_1", 32, 20},     // d, m, qs[16]
    {GgmlType::kQ5_0, "Q5_0", 32, 22},     // d, qh[4], qs[16]
    {GgmlType::kQ5_1, "Q5_1", 32, 24},     // d, m, qh[4], qs[16]
    {GgmlType::kQ8_0, "Q8_0", 32, 34},     // d, qs[32]
    {GgmlType::kQ2_K, "Q2_K", 256, 84},    // scales[16], qs[64], d, dmin
    {GgmlType::kQ3_K, "Q3_K", 256, 110},   // hmask[32], qs[64], scales[12], d
    {GgmlType::kQ4_K, "Q4_K", 256, 144},   // d, dmin, scales[12], qs[128]
    {GgmlType::kQ5_K, "Q5_K", 256, 176},   // d, dmin, scales[12], qh[32], qs[128]
    {GgmlType::kQ6_K, "Q6_K", 256, 210},   // ql[128], qh[64], scales[16], d
    {GgmlType::kIQ2_XXS, "IQ2_XXS", 256, 66},  // d, qs[32] (u16)
    {GgmlType::kIQ2_XS, "IQ2_XS", 256, 74},    // d, qs[32] (u16), scales[8]
    {GgmlType::kIQ3_XXS, "IQ3_XXS", 256, 98},  // d, qs[96]
    {GgmlType::kIQ1_S, "IQ1_S", 256, 50},      // d, qs[32], qh[8] (u16)
    {GgmlType::kIQ4_NL, "IQ4_NL", 32, 18}, // d, qs[16]
    {GgmlType::kIQ3_S, "IQ3_S", 256, 110},     // d, qs[64], qh[8], signs[32], scales[4]
    {GgmlType::kIQ2_S, "IQ2_S", 256, 82},      // d, qs[64], qh[8], scales[8]
    {GgmlType::kIQ4_XS, "IQ4_XS", 256, 136},  // d, scales_h, scales_l[4], qs[128]
    {GgmlType::kIQ1_M, "IQ1_M", 256, 56},      // qs[32], qh[16], scales[8] (d in the scales' top nibbles)
    {GgmlType::kBF16, "BF16", 1, 2},
    {GgmlType::kTQ1_0, "TQ1_0", 256, 54},  // qs[48], qh[4], d
    {GgmlType::kTQ2_0, "TQ2_0", 256, 66},  // qs[64], d
    {GgmlType::kMXFP4, "MXFP4", 32, 17},   // e (E8M0), qs[16] (E2M1 nibbles)
}};

// Names of ggml types that exist but that Octo does not read, for the error.
absl::string_view KnownButUnsupportedName(uint32_t id) {
  switch (id) {
    case 4: return "Q4_2 (removed from ggml)";
    case 5: return "Q4_3 (removed from ggml)";
    case 9: return "Q8_1";
    case 15: return "Q8_K";
    case 24: return "I8";
    case 25: return "I16";
    case 26: return "I32";
    case 27: return "I64";
    case 28: return "F64";
    default: return {};
  }
}

}  // namespace

std::span<const GgmlTypeInfo> AllGgmlTypes() { return kTypes; }

const GgmlTypeInfo& GgmlTypeInfoOf(GgmlType type) {
  for (const GgmlTypeInfo& info : kTypes) {
    if (info.type == type) return info;
  }
  // Every enumerator has a row; a value cast in from outside must go
  // through LookupGgmlType first. Reaching here is a programmer error.
  std::fprintf(stderr, "%s:%d: GgmlType %u has no row in the type table\n", __FILE__, __LINE__,
               static_cast<unsigned>(type));
  std::abort();
}

absl::StatusOr<GgmlTypeInfo> LookupGgmlType(uint32_t id) {
  for (const GgmlTypeInfo& info : kTypes) {
    if (static_cast<uint32_t>(info.type) == id) return info;
  }
  absl::string_view known = KnownButUnsupportedName(id);
  if (!known.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor type ", known, " (ggml type id ", id, ") is not supported"));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown ggml tensor type id ", id));
}

absl::StatusOr<GgmlTypeInfo> LookupGgmlTypeByName(absl::string_view name) {
  std::string upper = absl::AsciiStrToUpper(name);
  for (const GgmlTypeInfo& info : kTypes) {
    if (info.name == upper) return info;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown tensor type name '", name, "'"));
}

absl::StatusOr<uint64_t> GgmlTensorBytes(const GgmlTypeInfo& info, uint64_t row_elements,
                                         uint64_t n_elements) {
  if (row_elements == 0 || row_elements % info.block_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("row of ", row_elements, " elements is not a whole number of ",
                                                   info.name, " blocks (", info.block_size, " elements each)"));
  }
  if (n_elements % row_elements != 0) {
    return absl::InvalidArgumentError("element count is not a whole number of rows");
  }
  const uint64_t blocks = n_elements / info.block_size;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(info.type_size), &bytes)) {
    return absl::OutOfRangeError("tensor byte count overflows 64 bits");
  }
  return bytes;
}

}  // namespace octo
