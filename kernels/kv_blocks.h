// The KV cache's row encodings: which types a cache may hold, how a row of
// keys or values is encoded on write (KvAppend) and how one element of it is
// read (Attention). Both backends use these functions (OCTO_HD), so a row
// gets the same bytes from either.
//
// A cache row is one position's n_kv_heads * head_dim values of one layer,
// stored as GGUF blocks of the cache type laid end to end (F16: one value per
// two bytes; Q8_0, Q4_0, Q4_1: 32 values per block). A block may span two
// heads when head_dim is under 32: the row, not the head, is what must be a
// whole number of blocks (kv_types.h's KvRowCheck).
//
// Encoding a 32-value block (every value finite):
//   Q8_0  d = fp16(amax / 127); q = round(x / d) in -127..127.
//   Q4_0  m = the value of largest magnitude (its sign kept); d = fp16(m / -8);
//         q = clamp(round(x / d) + 8, 0, 15), so m itself is q 0.
//   Q4_1  lo, hi the least and greatest value; d = fp16((hi - lo) / 15),
//         m = fp16(lo); q = clamp(round((x - m) / d), 0, 15).
// Each q is chosen against the stored (fp16-rounded) d and m, so it is the
// nearest level the block can decode to: the error of a value is at most half
// a step, d / 2 (plus, at the ends of Q4_0 and Q4_1's range, what the fp16
// rounding of d and m moved the range). An all-zero block has d = 0 and
// decodes to zeros. round() is half away from zero on both backends, and
// every division is IEEE (nvcc's default -prec-div), so the bits agree.
// Reading: block_decode.h's Decoder (x = d * q, d * (q - 8), d * q + m).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/block_decode.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/half.h"
#include "kernels/host_device.h"
#include "kernels/kv_types.h"
#include "storage/ggml_type.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace octo {

namespace kv_blocks {

OCTO_HD inline uint16_t HalfOf(float x) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(x));
#else
  return Fp32ToFp16(x);
#endif
}

// round(x), halves away from zero (as roundf), held to [lo, hi] (integers);
// a NaN gives lo, so no input is undefined behaviour. Plain comparisons and
// an int conversion, not fmaxf and roundf, which are library calls on the
// baseline x86-64 the portable kernels are built for.
OCTO_HD inline int RoundClamped(float x, float lo, float hi) {
  if (!(x >= lo)) x = lo;  // also NaN
  if (x > hi) x = hi;
  int i = static_cast<int>(x);           // toward zero; |x| is small
  const float frac = x - static_cast<float>(i);  // exact
  if (frac >= 0.5f) ++i;
  if (frac <= -0.5f) --i;
  return i;
}

OCTO_HD inline float Larger(float a, float b) { return b > a ? b : a; }
OCTO_HD inline float Smaller(float a, float b) { return b < a ? b : a; }

// One 32-value block of x into `block` (the type's GGUF bytes).
OCTO_HD inline void EncodeQ8_0(const float* x, uint8_t* block) {
  auto& b = *reinterpret_cast<cpu::BlockQ8_0*>(block);
  float amax = 0.0f;
  for (int j = 0; j < cpu::kQK; ++j) amax = Larger(amax, fabsf(x[j]));
  b.d = HalfOf(amax / 127.0f);
  const float d = block_decode::HalfBits(b.d);
  for (int j = 0; j < cpu::kQK; ++j) b.qs[j] = static_cast<int8_t>(d == 0.0f ? 0 : RoundClamped(x[j] / d, -127, 127));
}

OCTO_HD inline void EncodeQ4_0(const float* x, uint8_t* block) {
  auto& b = *reinterpret_cast<cpu::BlockQ4_0*>(block);
  float m = 0.0f;
  for (int j = 0; j < cpu::kQK; ++j) {
    if (fabsf(x[j]) > fabsf(m)) m = x[j];
  }
  b.d = HalfOf(m / -8.0f);
  const float d = block_decode::HalfBits(b.d);
  auto q = [&](int j) { return d == 0.0f ? 8 : RoundClamped(x[j] / d, -8, 7) + 8; };
  for (int j = 0; j < cpu::kQK / 2; ++j) b.qs[j] = static_cast<uint8_t>(q(j) | q(j + 16) << 4);
}

OCTO_HD inline void EncodeQ4_1(const float* x, uint8_t* block) {
  auto& b = *reinterpret_cast<cpu::BlockQ4_1*>(block);
  float lo = x[0], hi = x[0];
  for (int j = 1; j < cpu::kQK; ++j) {
    lo = Smaller(lo, x[j]);
    hi = Larger(hi, x[j]);
  }
  b.d = HalfOf((hi - lo) / 15.0f);
  b.m = HalfOf(lo);
  const float d = block_decode::HalfBits(b.d), m = block_decode::HalfBits(b.m);
  auto q = [&](int j) { return d == 0.0f ? 0 : RoundClamped((x[j] - m) / d, 0, 15); };
  for (int j = 0; j < cpu::kQK / 2; ++j) b.qs[j] = static_cast<uint8_t>(q(j) | q(j + 16) << 4);
}

// Encodes unit `i` of a row: value i for F16, block i otherwise. `x` is
// the row's values, `row` its bytes.
OCTO_HD inline void EncodeUnit(GgmlType type, const float* x, uint8_t* row, int64_t i) {
  switch (type) {
    case GgmlType::kQ8_0:
      EncodeQ8_0(x + i * cpu::kQK, row + i * sizeof(cpu::BlockQ8_0));
      return;
    case GgmlType::kQ4_0:
      EncodeQ4_0(x + i * cpu::kQK, row + i * sizeof(cpu::BlockQ4_0));
      return;
    case GgmlType::kQ4_1:
      EncodeQ4_1(x + i * cpu::kQK, row + i * sizeof(cpu::BlockQ4_1));
      return;
    default:  // F16: one 16-bit store (rows start 2-byte aligned), as the
              // blocks' scales take. Two byte stores of the half stored a wrong
              // low byte on an H100 (sm_90, nvcc 13.0; the executor cannot see it).
      reinterpret_cast<uint16_t*>(row)[i] = HalfOf(x[i]);
      return;
  }
}

// Units (values for F16, blocks otherwise) of a row of n values.
OCTO_HD inline int64_t UnitsOf(GgmlType type, int64_t n) { return type == GgmlType::kF16 ? n : n / cpu::kQK; }

// Value e of a row of type T (rows start 2-byte aligned).
template <GgmlType T>
OCTO_HD inline float Element(const uint8_t* row, int e) {
  if constexpr (T == GgmlType::kF16) {
    return block_decode::HalfBits(reinterpret_cast<const uint16_t*>(row)[e]);
  } else {
    using D = block_decode::Decoder<T>;
    return D::Element(row + static_cast<int64_t>(e / D::kElements) * D::kBytes, e % D::kElements);
  }
}

// Values j0 .. j0 + n - 1 of one block of T into out: Decoder<T>::Element's
// floats (the same expressions), with the block's scale read once.
template <GgmlType T>
OCTO_HD inline void DecodeBlockSpan(const uint8_t* block, int j0, int n, float* out) {
  if constexpr (T == GgmlType::kQ8_0) {
    const auto& b = *reinterpret_cast<const cpu::BlockQ8_0*>(block);
    const float d = block_decode::HalfBits(b.d);
    for (int j = 0; j < n; ++j) out[j] = static_cast<float>(b.qs[j0 + j]) * d;
  } else if constexpr (T == GgmlType::kQ4_0 || T == GgmlType::kQ4_1) {
    // Q4_0: (q - 8) * d; Q4_1: q * d + m. Elements j < 16 are low nibbles.
    const auto& b = *reinterpret_cast<const cpu::BlockQ4_0*>(block);  // d, then Q4_1's m
    const float d = block_decode::HalfBits(b.d);
    const uint8_t* qs = block + (T == GgmlType::kQ4_0 ? sizeof(cpu::BlockQ4_0) : sizeof(cpu::BlockQ4_1)) - cpu::kQK / 2;
    const float m = T == GgmlType::kQ4_1 ? block_decode::HalfBits(reinterpret_cast<const cpu::BlockQ4_1*>(block)->m) : 0;
    for (int j = 0; j < n; ++j) {
      const int k = j0 + j;
      const int q = k < 16 ? qs[k] & 0xF : qs[k - 16] >> 4;
      if constexpr (T == GgmlType::kQ4_0) {
        out[j] = static_cast<float>(q - 8) * d;
      } else {
        out[j] = static_cast<float>(q) * d + m;
      }
    }
  } else {
    using D = block_decode::Decoder<T>;
    for (int j = 0; j < n; ++j) out[j] = D::Element(block, j0 + j);
  }
}

// f(std::integral_constant<GgmlType, type>{}) for a cache type (F16 for
// any other: the ops check the types first).
template <typename F>
decltype(auto) Visit(GgmlType type, F&& f) {
  switch (type) {
    case GgmlType::kQ8_0:
      return f(std::integral_constant<GgmlType, GgmlType::kQ8_0>{});
    case GgmlType::kQ4_0:
      return f(std::integral_constant<GgmlType, GgmlType::kQ4_0>{});
    case GgmlType::kQ4_1:
      return f(std::integral_constant<GgmlType, GgmlType::kQ4_1>{});
    default:
      return f(std::integral_constant<GgmlType, GgmlType::kF16>{});
  }
}

}  // namespace kv_blocks
}  // namespace octo
