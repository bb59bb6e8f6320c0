// Activation encodings for MatMul: each fp32 row of x is converted once to the
// encoding its weight type's dot product reads (the table in kernels/ops.h),
// bit for bit as llama.cpp's x86 CPU build converts it:
//
//   Q8_0  per 32 values: amax = max |x|; d = amax / 127 stored as fp16;
//         q = round-half-even(x * (127 / amax)) (0 when amax == 0). Note the
//         multiplier is 127 / amax, not 1 / fp16(d), and the rounding is to
//         even (_mm256_round_ps), not roundf's away from zero. The row is the
//         ggml blocks followed by a side table derived from them
//         (Q8_0Side in quant_blocks.h) that the AVX2 dot products read.
//   Q8_1  Q8_0 plus s = fp16(d * sum(q)) with d the fp32 amax / 127.
//   Q8_K  per 256 values (ggml's reference quantizer, which x86 uses): max =
//         the x of largest |x| (the first one on ties), sign kept;
//         iscale = -127 / max; q = min(127, round-half-even(iscale * x));
//         d = 1 / iscale (fp32, so negative when max > 0); bsums[j] = sum of
//         q over 16j..16j+15. An all-zero block gives d = 0, q = 0.
//   F16   round to nearest even (F16C); BF16 round to nearest even, NaN kept.
//   F32   the row itself (no conversion; MatMul reads x directly).
// Inputs are expected finite; a NaN or inf gives unspecified bytes (no UB).
//
// The portable and AVX2 versions write identical bytes (tested).
#pragma once

#include <cstdint>

#include "kernels/ops.h"
#include "storage/ggml_type.h"

namespace octo::cpu {

enum class ActType { kF32, kF16, kBF16, kQ8_0, kQ8_1, kQ8_K };

const char* ActTypeName(ActType type);  // "Q8_0", ...

// Values per block of `type` (1 for the float types).
int ActBlockSize(ActType type);

// Bytes of one encoded row of `cols` values (for Q8_0 the blocks and the side
// table); cols a multiple of ActBlockSize.
int64_t ActRowBytes(ActType type, int64_t cols);

// Encodes x (cols) into out (ActRowBytes(type, cols) bytes). cols must be a
// multiple of ActBlockSize(type); simd == kAvx2 requires an AVX2 CPU.
void QuantizeActivationRow(ActType type, const float* x, int64_t cols, void* out, Simd simd);

// The values an encoded row stands for (tests build their references on it).
void DequantizeActivationRow(ActType type, const void* in, int64_t cols, float* out);

// --- The individual encoders (quantize_activation.cc / _avx2.cc) --------------
void QuantizeRowQ8_0(const float* x, int64_t cols, void* out);
void QuantizeRowQ8_1(const float* x, int64_t cols, void* out);
void QuantizeRowQ8_K(const float* x, int64_t cols, void* out);
void QuantizeRowF16(const float* x, int64_t cols, void* out);
// Writes the Q8_0 side table of a row whose blocks are already written.
void FillQ8_0Side(int64_t cols, void* row);
void QuantizeRowBf16(const float* x, int64_t cols, void* out);
#if defined(__x86_64__)
void QuantizeRowQ8_0Avx2(const float* x, int64_t cols, void* out);
void QuantizeRowQ8_1Avx2(const float* x, int64_t cols, void* out);
void QuantizeRowF16Avx2(const float* x, int64_t cols, void* out);
#endif

}  // namespace octo::cpu
