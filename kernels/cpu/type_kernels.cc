// The table of weight types the CPU MatMul and DequantizeRows support.
#include "kernels/cpu/type_kernels.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace octo::cpu {
namespace {

#if defined(__x86_64__)
#define OCTO_AVX2(fn) fn
#else
#define OCTO_AVX2(fn) nullptr
#endif

// Activation types follow llama.cpp's CPU backend (vec_dot_type), see ops.h.
constexpr TypeKernels kTypeKernels[] = {
    {GgmlType::kF32, ActType::kF32, DequantizeRowF32, VecDotF32, OCTO_AVX2(VecDotF32Avx2),
     OCTO_AVX2(VecDotTileF32Avx2)},
    {GgmlType::kF16, ActType::kF16, DequantizeRowF16, VecDotF16, OCTO_AVX2(VecDotF16Avx2),
     OCTO_AVX2(VecDotTileF16Avx2)},
    {GgmlType::kBF16, ActType::kBF16, DequantizeRowBf16, VecDotBf16, OCTO_AVX2(VecDotBf16Avx2),
     OCTO_AVX2(VecDotTileBf16Avx2)},
    {GgmlType::kQ4_0, ActType::kQ8_0, DequantizeRowQ4_0, VecDotQ4_0, OCTO_AVX2(VecDotQ4_0Avx2),
     OCTO_AVX2(VecDotTileQ4_0Avx2)},
    {GgmlType::kQ4_1, ActType::kQ8_1, DequantizeRowQ4_1, VecDotQ4_1, OCTO_AVX2(VecDotQ4_1Avx2),
     OCTO_AVX2(VecDotTileQ4_1Avx2)},
    {GgmlType::kQ5_0, ActType::kQ8_0, DequantizeRowQ5_0, VecDotQ5_0, OCTO_AVX2(VecDotQ5_0Avx2),
     OCTO_AVX2(VecDotTileQ5_0Avx2)},
    {GgmlType::kQ5_1, ActType::kQ8_1, DequantizeRowQ5_1, VecDotQ5_1, OCTO_AVX2(VecDotQ5_1Avx2),
     OCTO_AVX2(VecDotTileQ5_1Avx2)},
    {GgmlType::kQ8_0, ActType::kQ8_0, DequantizeRowQ8_0, VecDotQ8_0, OCTO_AVX2(VecDotQ8_0Avx2),
     OCTO_AVX2(VecDotTileQ8_0Avx2)},
    {GgmlType::kQ2_K, ActType::kQ8_K, DequantizeRowQ2_K, VecDotQ2_K, OCTO_AVX2(VecDotQ2_KAvx2),
     OCTO_AVX2(VecDotTileQ2_KAvx2)},
    {GgmlType::kQ3_K, ActType::kQ8_K, DequantizeRowQ3_K, VecDotQ3_K, OCTO_AVX2(VecDotQ3_KAvx2),
     OCTO_AVX2(VecDotTileQ3_KAvx2)},
    {GgmlType::kQ4_K, ActType::kQ8_K, DequantizeRowQ4_K, VecDotQ4_K, OCTO_AVX2(VecDotQ4_KAvx2),
     OCTO_AVX2(VecDotTileQ4_KAvx2)},
    {GgmlType::kQ5_K, ActType::kQ8_K, DequantizeRowQ5_K, VecDotQ5_K, OCTO_AVX2(VecDotQ5_KAvx2),
     OCTO_AVX2(VecDotTileQ5_KAvx2)},
    {GgmlType::kQ6_K, ActType::kQ8_K, DequantizeRowQ6_K, VecDotQ6_K, OCTO_AVX2(VecDotQ6_KAvx2),
     OCTO_AVX2(VecDotTileQ6_KAvx2)},
    {GgmlType::kIQ4_NL, ActType::kQ8_0, DequantizeRowIq4Nl, VecDotIq4Nl, OCTO_AVX2(VecDotIq4NlAvx2),
     OCTO_AVX2(VecDotTileIq4NlAvx2)},
    {GgmlType::kIQ4_XS, ActType::kQ8_K, DequantizeRowIq4Xs, VecDotIq4Xs, OCTO_AVX2(VecDotIq4XsAvx2),
     OCTO_AVX2(VecDotTileIq4XsAvx2)},
    {GgmlType::kMXFP4, ActType::kQ8_0, DequantizeRowMxfp4, VecDotMxfp4, OCTO_AVX2(VecDotMxfp4Avx2), nullptr},
    {GgmlType::kTQ1_0, ActType::kQ8_K, DequantizeRowTq1_0, VecDotTq1_0, OCTO_AVX2(VecDotTq1_0Avx2), nullptr},
    {GgmlType::kTQ2_0, ActType::kQ8_K, DequantizeRowTq2_0, VecDotTq2_0, OCTO_AVX2(VecDotTq2_0Avx2), nullptr},
    {GgmlType::kIQ2_XXS, ActType::kQ8_K, DequantizeRowIq2Xxs, VecDotIq2Xxs, OCTO_AVX2(VecDotIq2XxsAvx2), nullptr},
    {GgmlType::kIQ2_XS, ActType::kQ8_K, DequantizeRowIq2Xs, VecDotIq2Xs, OCTO_AVX2(VecDotIq2XsAvx2), nullptr},
    {GgmlType::kIQ2_S, ActType::kQ8_K, DequantizeRowIq2S, VecDotIq2S, OCTO_AVX2(VecDotIq2SAvx2), nullptr},
    {GgmlType::kIQ3_XXS, ActType::kQ8_K, DequantizeRowIq3Xxs, VecDotIq3Xxs, OCTO_AVX2(VecDotIq3XxsAvx2), nullptr},
    {GgmlType::kIQ3_S, ActType::kQ8_K, DequantizeRowIq3S, VecDotIq3S, OCTO_AVX2(VecDotIq3SAvx2), nullptr},
    {GgmlType::kIQ1_S, ActType::kQ8_K, DequantizeRowIq1S, VecDotIq1S, OCTO_AVX2(VecDotIq1SAvx2), nullptr},
    {GgmlType::kIQ1_M, ActType::kQ8_K, DequantizeRowIq1M, VecDotIq1M, OCTO_AVX2(VecDotIq1MAvx2), nullptr},
};

#undef OCTO_AVX2

}  // namespace

const TypeKernels* FindTypeKernels(GgmlType type) {
  for (const TypeKernels& k : kTypeKernels) {
    if (k.type == type) return &k;
  }
  return nullptr;
}

VecDotFn SelectDot(const TypeKernels& kernels, Simd simd) {
  if (simd == Simd::kAvx2 && kernels.dot_avx2 != nullptr) return kernels.dot_avx2;
  return kernels.dot;
}

VecDotTileFn SelectDotTile(const TypeKernels& kernels, Simd simd) {
  return simd == Simd::kAvx2 ? kernels.dot_tile_avx2 : nullptr;
}

absl::StatusOr<CheckedWeights> CheckWeightMatrix(absl::string_view op, const WeightMatrix& w) {
  const TypeKernels* kernels = FindTypeKernels(w.type);
  const absl::StatusOr<GgmlTypeInfo> info = LookupGgmlType(static_cast<uint32_t>(w.type));
  if (kernels == nullptr || !info.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: w.type %d has no CPU kernels", op, static_cast<uint32_t>(w.type)));
  }
  if (w.data == nullptr) return absl::InvalidArgumentError(absl::StrFormat("%s: w.data is null", op));
  if (w.rows <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: w.rows (%d) must be positive", op, w.rows));
  }
  if (w.cols <= 0 || w.cols % info->block_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: w.cols (%d) must be a positive multiple of %s's block size %d", op, w.cols,
                        info->name, info->block_size));
  }
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t blocks = w.cols / info->block_size;
  if (blocks > kMax / info->type_size || w.rows > kMax / (blocks * info->type_size)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: w (%d x %d) is larger than the address space", op, w.rows, w.cols));
  }
  return CheckedWeights{kernels, blocks * info->type_size};
}

}  // namespace octo::cpu
