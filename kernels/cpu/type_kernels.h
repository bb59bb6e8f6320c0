// Per weight type: its activation encoding, its dequantizer and its dot
// products, in one table (type_kernels.cc). MatMul and DequantizeRows look a
// type up here; a new type adds a row and its functions.
//
// A dot product takes one weight row (cols / block_size blocks) and one
// activation row in the type's ActType encoding (quantize_activation.h) and
// returns their dot product. Within a block the integer products are summed
// exactly; blocks combine in float as ggml combines them (d_w * d_x * isum,
// K-quants with their sub-block scales and the bsums for the mins). The
// portable and AVX2 versions differ only in float summation order.
//
// A tile dot takes one weight row and a token tile of n_x (1..kMaxTileTokens)
// activation rows (act_tile.h) and writes the n_x dot products to
// out[t * out_stride]. Each is bit for bit what the type's AVX2 dot gives for
// that token alone (MatMul's determinism rests on it; tested for every tile
// size): the tokens share the loading and unpacking of the weights; every
// float operation is each token's own, in its one-token order.
//
// Every function here is pure and thread-safe; none checks its arguments
// (MatMul and DequantizeRows do).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu/quantize_activation.h"
#include "kernels/ops.h"
#include "storage/ggml_type.h"

namespace octo::cpu {

using VecDotFn = float (*)(const void* w_row, const void* x_row, int64_t cols);
using DequantizeRowFn = void (*)(const void* w_row, int64_t cols, float* out);
using VecDotTileFn = void (*)(const void* w_row, const void* x_tile, int n_x, int64_t cols, float* out,
                              int64_t out_stride);

struct TypeKernels {
  GgmlType type;
  ActType act;
  DequantizeRowFn dequantize;
  VecDotFn dot;                // portable C++
  VecDotFn dot_avx2;           // nullptr where there is none (the portable one is used)
  VecDotTileFn dot_tile_avx2;  // nullptr where there is none (one token at a time)
};

// The row for `type`; nullptr when Octo has no kernels for it.
const TypeKernels* FindTypeKernels(GgmlType type);

// The dot product `simd` selects (the portable one when there is no AVX2 one).
VecDotFn SelectDot(const TypeKernels& kernels, Simd simd);

// The tile dot `simd` selects: the AVX2 one, nullptr for kPortable or where
// the type has none.
VecDotTileFn SelectDotTile(const TypeKernels& kernels, Simd simd);

// A weight matrix that passed CheckWeightMatrix: its kernels and row stride.
struct CheckedWeights {
  const TypeKernels* kernels;
  int64_t row_bytes;  // bytes of one row (cols / block_size * type_size)
};

// The checks MatMul and DequantizeRows share: a type with kernels, non-null
// data, rows > 0, cols > 0 and a multiple of the block size, and a matrix
// whose byte size fits int64. INVALID_ARGUMENT names `op` and the field.
absl::StatusOr<CheckedWeights> CheckWeightMatrix(absl::string_view op, const WeightMatrix& w);

// --- Dequantizers (dequantize_row.cc): exactly ggml's dequantize_row_* --------
void DequantizeRowF32(const void* w, int64_t cols, float* out);
void DequantizeRowF16(const void* w, int64_t cols, float* out);
void DequantizeRowBf16(const void* w, int64_t cols, float* out);
void DequantizeRowQ4_0(const void* w, int64_t cols, float* out);
void DequantizeRowQ4_1(const void* w, int64_t cols, float* out);
void DequantizeRowQ5_0(const void* w, int64_t cols, float* out);
void DequantizeRowQ5_1(const void* w, int64_t cols, float* out);
void DequantizeRowQ8_0(const void* w, int64_t cols, float* out);
void DequantizeRowQ2_K(const void* w, int64_t cols, float* out);
void DequantizeRowQ3_K(const void* w, int64_t cols, float* out);
void DequantizeRowQ4_K(const void* w, int64_t cols, float* out);
void DequantizeRowQ5_K(const void* w, int64_t cols, float* out);
void DequantizeRowQ6_K(const void* w, int64_t cols, float* out);
void DequantizeRowIq4Nl(const void* w, int64_t cols, float* out);
void DequantizeRowIq4Xs(const void* w, int64_t cols, float* out);
void DequantizeRowTq1_0(const void* w, int64_t cols, float* out);
void DequantizeRowMxfp4(const void* w, int64_t cols, float* out);
void DequantizeRowIq2Xxs(const void* w, int64_t cols, float* out);  // vec_dot_iq.cc, as the dots below
void DequantizeRowIq2Xs(const void* w, int64_t cols, float* out);
void DequantizeRowIq2S(const void* w, int64_t cols, float* out);
void DequantizeRowIq3Xxs(const void* w, int64_t cols, float* out);
void DequantizeRowIq3S(const void* w, int64_t cols, float* out);
void DequantizeRowIq1S(const void* w, int64_t cols, float* out);
void DequantizeRowIq1M(const void* w, int64_t cols, float* out);
void DequantizeRowTq2_0(const void* w, int64_t cols, float* out);

// --- Portable dot products (vec_dot_float.cc, vec_dot_q32.cc, vec_dot_kquants.cc)
float VecDotF32(const void* w, const void* x, int64_t cols);
float VecDotF16(const void* w, const void* x, int64_t cols);
float VecDotBf16(const void* w, const void* x, int64_t cols);
float VecDotQ4_0(const void* w, const void* x, int64_t cols);
float VecDotQ4_1(const void* w, const void* x, int64_t cols);
float VecDotQ5_0(const void* w, const void* x, int64_t cols);
float VecDotQ5_1(const void* w, const void* x, int64_t cols);
float VecDotQ8_0(const void* w, const void* x, int64_t cols);
float VecDotIq4Nl(const void* w, const void* x, int64_t cols);
float VecDotMxfp4(const void* w, const void* x, int64_t cols);
float VecDotQ2_K(const void* w, const void* x, int64_t cols);
float VecDotQ3_K(const void* w, const void* x, int64_t cols);
float VecDotQ4_K(const void* w, const void* x, int64_t cols);
float VecDotQ5_K(const void* w, const void* x, int64_t cols);
float VecDotQ6_K(const void* w, const void* x, int64_t cols);
float VecDotIq4Xs(const void* w, const void* x, int64_t cols);
float VecDotTq1_0(const void* w, const void* x, int64_t cols);  // vec_dot_ternary.cc
float VecDotTq2_0(const void* w, const void* x, int64_t cols);
float VecDotIq2Xxs(const void* w, const void* x, int64_t cols);
float VecDotIq2Xs(const void* w, const void* x, int64_t cols);
float VecDotIq2S(const void* w, const void* x, int64_t cols);
float VecDotIq3Xxs(const void* w, const void* x, int64_t cols);
float VecDotIq3S(const void* w, const void* x, int64_t cols);
float VecDotIq1S(const void* w, const void* x, int64_t cols);
float VecDotIq1M(const void* w, const void* x, int64_t cols);

// --- AVX2 dot products (the same files with _avx2) ------------------------------
#if defined(__x86_64__)
float VecDotIq1SAvx2(const void* w, const void* x, int64_t cols);  // vec_dot_iq1_avx2.cc
float VecDotIq1MAvx2(const void* w, const void* x, int64_t cols);
float VecDotF32Avx2(const void* w, const void* x, int64_t cols);
float VecDotF16Avx2(const void* w, const void* x, int64_t cols);
float VecDotBf16Avx2(const void* w, const void* x, int64_t cols);
float VecDotQ4_0Avx2(const void* w, const void* x, int64_t cols);
float VecDotQ4_1Avx2(const void* w, const void* x, int64_t cols);
float VecDotQ5_0Avx2(const void* w, const void* x, int64_t cols);
float VecDotQ5_1Avx2(const void* w, const void* x, int64_t cols);
float VecDotQ8_0Avx2(const void* w, const void* x, int64_t cols);
float VecDotIq4NlAvx2(const void* w, const void* x, int64_t cols);
float VecDotMxfp4Avx2(const void* w, const void* x, int64_t cols);
float VecDotIq2XxsAvx2(const void* w, const void* x, int64_t cols);  // vec_dot_iq_avx2.cc
float VecDotIq2XsAvx2(const void* w, const void* x, int64_t cols);
float VecDotIq2SAvx2(const void* w, const void* x, int64_t cols);
float VecDotIq3XxsAvx2(const void* w, const void* x, int64_t cols);
float VecDotIq3SAvx2(const void* w, const void* x, int64_t cols);
float VecDotTq1_0Avx2(const void* w, const void* x, int64_t cols);  // vec_dot_ternary_avx2.cc
float VecDotTq2_0Avx2(const void* w, const void* x, int64_t cols);
float VecDotQ2_KAvx2(const void* w, const void* x, int64_t cols);
float VecDotQ3_KAvx2(const void* w, const void* x, int64_t cols);
float VecDotQ4_KAvx2(const void* w, const void* x, int64_t cols);
float VecDotQ5_KAvx2(const void* w, const void* x, int64_t cols);
float VecDotQ6_KAvx2(const void* w, const void* x, int64_t cols);
float VecDotIq4XsAvx2(const void* w, const void* x, int64_t cols);

// --- AVX2 tile dots (vec_dot_tile_*_avx2.cc) --------------------------------------
void VecDotTileF32Avx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride);
void VecDotTileF16Avx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride);
void VecDotTileBf16Avx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride);
void VecDotTileQ4_0Avx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride);
void VecDotTileQ4_1Avx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride);
void VecDotTileQ5_0Avx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride);
void VecDotTileQ5_1Avx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride);
void VecDotTileQ8_0Avx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride);
void VecDotTileIq4NlAvx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride);
void VecDotTileQ4_KAvx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride);
void VecDotTileQ5_KAvx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride);
void VecDotTileQ6_KAvx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride);
void VecDotTileQ2_KAvx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride);
void VecDotTileQ3_KAvx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride);
void VecDotTileIq4XsAvx2(const void* w, const void* x_tile, int n_x, int64_t cols, float* out, int64_t out_stride);
#endif

}  // namespace octo::cpu
