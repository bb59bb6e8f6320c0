// One element of a weight row, decoded straight from its GGUF block: the
// value ggml's dequantize_row_* gives, bit for bit when the arithmetic is not
// contracted (the float expressions are kernels/cpu/dequantize_row.cc's, in
// the same order). The CUDA kernels decode with these (OCTO_HD), and
// tests/kernels/block_decode_test.cc checks them on the host against the CPU
// backend's DequantizeRows for every type.
//
// Decoder<T>: kElements per block, kBytes per block, and Element(block, j)
// for j in [0, kElements). F32/F16/BF16 are blocks of one element. Block
// pointers need only the 2-byte alignment every GGUF row start has.
#pragma once

#include <bit>
#include <cstdint>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/half.h"
#include "kernels/host_device.h"
#include "kernels/iq_blocks.h"
#include "storage/ggml_type.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace octo::block_decode {

OCTO_HD inline float HalfBits(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  return Fp16ToFp32(h);
#endif
}

OCTO_HD inline float Bf16Bits(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
#else
  return Bf16ToFp32(h);
#endif
}

// Entry q of a 16-entry int8 table packed in two words (entries 0..7, then
// 8..15, lowest byte first), which the device reads without a table in its
// memory.
OCTO_HD constexpr int PackedLevel(uint64_t low, uint64_t high, int q) {
  return static_cast<int8_t>(static_cast<uint8_t>((q < 8 ? low : high) >> (8 * (q & 7))));
}
template <size_t N>
constexpr bool SameLevels(int (*level)(int), const int8_t (&table)[N]) {
  for (size_t q = 0; q < N; ++q) {
    if (level(static_cast<int>(q)) != table[q]) return false;
  }
  return true;
}

// kIq4NlValues[q]; the static_assert holds it to the CPU table.
OCTO_HD constexpr int Iq4NlLevel(int q) { return PackedLevel(0xF6EADDCFBFAD9881ull, 0x7159453526190D01ull, q); }
static_assert(SameLevels(Iq4NlLevel, cpu::kIq4NlValues));

// The 4-bit quant of element j of a 32-wide nibble block: byte j holds
// element j (low nibble) and element j + 16 (high nibble).
OCTO_HD inline int Nibble32(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }

// Element j's 5-bit quant of a Q5_0/Q5_1 block.
OCTO_HD inline int Q5Quant(const uint8_t* qs, const uint8_t* qh, int j) {
  return Nibble32(qs, j) | (((qh[j / 8] >> (j % 8)) & 1) << 4);
}

template <GgmlType T>
struct Decoder;

OCTO_HD inline float FloatBits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  return std::bit_cast<float>(bits);
#endif
}

template <>
struct Decoder<GgmlType::kF32> {
  static constexpr int kElements = 1, kBytes = 4;
  OCTO_HD static float Element(const uint8_t* p, int) {
    return FloatBits(p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24));
  }
};

template <>
struct Decoder<GgmlType::kF16> {
  static constexpr int kElements = 1, kBytes = 2;
  OCTO_HD static float Element(const uint8_t* p, int) { return HalfBits(static_cast<uint16_t>(p[0] | (p[1] << 8))); }
};

template <>
struct Decoder<GgmlType::kBF16> {
  static constexpr int kElements = 1, kBytes = 2;
  OCTO_HD static float Element(const uint8_t* p, int) { return Bf16Bits(static_cast<uint16_t>(p[0] | (p[1] << 8))); }
};

template <>
struct Decoder<GgmlType::kQ4_0> {
  static constexpr int kElements = cpu::kQK, kBytes = sizeof(cpu::BlockQ4_0);
  OCTO_HD static float Element(const uint8_t* p, int j) {
    const auto& b = *reinterpret_cast<const cpu::BlockQ4_0*>(p);
    return static_cast<float>(Nibble32(b.qs, j) - 8) * HalfBits(b.d);
  }
};

template <>
struct Decoder<GgmlType::kQ4_1> {
  static constexpr int kElements = cpu::kQK, kBytes = sizeof(cpu::BlockQ4_1);
  OCTO_HD static float Element(const uint8_t* p, int j) {
    const auto& b = *reinterpret_cast<const cpu::BlockQ4_1*>(p);
    return static_cast<float>(Nibble32(b.qs, j)) * HalfBits(b.d) + HalfBits(b.m);
  }
};

template <>
struct Decoder<GgmlType::kQ5_0> {
  static constexpr int kElements = cpu::kQK, kBytes = sizeof(cpu::BlockQ5_0);
  OCTO_HD static float Element(const uint8_t* p, int j) {
    const auto& b = *reinterpret_cast<const cpu::BlockQ5_0*>(p);
    return static_cast<float>(Q5Quant(b.qs, b.qh, j) - 16) * HalfBits(b.d);
  }
};

template <>
struct Decoder<GgmlType::kQ5_1> {
  static constexpr int kElements = cpu::kQK, kBytes = sizeof(cpu::BlockQ5_1);
  OCTO_HD static float Element(const uint8_t* p, int j) {
    const auto& b = *reinterpret_cast<const cpu::BlockQ5_1*>(p);
    return static_cast<float>(Q5Quant(b.qs, b.qh, j)) * HalfBits(b.d) + HalfBits(b.m);
  }
};

template <>
struct Decoder<GgmlType::kQ8_0> {
  static constexpr int kElements = cpu::kQK, kBytes = sizeof(cpu::BlockQ8_0);
  OCTO_HD static float Element(const uint8_t* p, int j) {
    const auto& b = *reinterpret_cast<const cpu::BlockQ8_0*>(p);
    return static_cast<float>(b.qs[j]) * HalfBits(b.d);
  }
};

template <>
struct Decoder<GgmlType::kIQ4_NL> {
  static constexpr int kElements = cpu::kQK, kBytes = sizeof(cpu::BlockIq4Nl);
  OCTO_HD static float Element(const uint8_t* p, int j) {
    const auto& b = *reinterpret_cast<const cpu::BlockIq4Nl*>(p);
    return HalfBits(b.d) * static_cast<float>(Iq4NlLevel(Nibble32(b.qs, j)));
  }
};

// 16 sub-blocks of 16; sub-block s reads 16 bytes of one 32-byte half of qs
// at bit offset 2 * ((s % 8) / 2).
template <>
struct Decoder<GgmlType::kQ2_K> {
  static constexpr int kElements = cpu::kQKK, kBytes = sizeof(cpu::BlockQ2_K);
  OCTO_HD static float Element(const uint8_t* p, int j) {
    const auto& b = *reinterpret_cast<const cpu::BlockQ2_K*>(p);
    const int s = j / 16;
    const uint8_t* q = b.qs + 32 * (s / 8) + 16 * (s % 2);
    const int shift = 2 * ((s % 8) / 2);
    const float dl = HalfBits(b.d) * static_cast<float>(b.scales[s] & 0xF);
    const float ml = HalfBits(b.dmin) * static_cast<float>(b.scales[s] >> 4);
    return dl * static_cast<float>((q[j % 16] >> shift) & 3) - ml;
  }
};

template <>
struct Decoder<GgmlType::kQ3_K> {
  static constexpr int kElements = cpu::kQKK, kBytes = sizeof(cpu::BlockQ3_K);
  OCTO_HD static float Element(const uint8_t* p, int j) {
    const auto& b = *reinterpret_cast<const cpu::BlockQ3_K*>(p);
    const int s = j / 16, half = s / 8, field = (s % 8) / 2;
    const int l = 16 * (s % 2) + j % 16;
    const int high = (b.hmask[l] >> (4 * half + field)) & 1;
    const int q = ((b.qs[32 * half + l] >> (2 * field)) & 3) - (high ? 0 : 4);
    const float dl = HalfBits(b.d) * static_cast<float>(cpu::UnpackQ3KScale(b.scales, s));
    return dl * static_cast<float>(q);
  }
};

// Q4_K and Q5_K: 8 sub-blocks of 32, sub-block s in the low (s even) or high
// nibbles of qs bytes 32 * (s / 2) ..; Q5_K's fifth bit is qh bit s.
template <typename Block, bool kFifthBit>
struct DecoderQ45K {
  static constexpr int kElements = cpu::kQKK, kBytes = sizeof(Block);
  OCTO_HD static float Element(const uint8_t* p, int j) {
    const auto& b = *reinterpret_cast<const Block*>(p);
    const int s = j / 32, l = j % 32;
    int sc, m;
    cpu::UnpackQ4KScaleMin(b.scales, s, &sc, &m);
    const float dl = HalfBits(b.d) * static_cast<float>(sc);
    const float ml = HalfBits(b.dmin) * static_cast<float>(m);
    int v = (b.qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0xF;
    if constexpr (kFifthBit) v += ((b.qh[l] >> s) & 1) << 4;
    return dl * static_cast<float>(v) - ml;
  }
};
template <>
struct Decoder<GgmlType::kQ4_K> : DecoderQ45K<cpu::BlockQ4_K, false> {};
template <>
struct Decoder<GgmlType::kQ5_K> : DecoderQ45K<cpu::BlockQ5_K, true> {};

// Two halves of 128; in a half, element 32 * k + l (k = 0..3) takes its low
// nibble from ql[l] (k even) or ql[l + 32] (k odd), low (k < 2) or high
// nibble, and its top 2 bits from qh[l] bits 2k..2k+1; scale 2k + l / 16.
template <>
struct Decoder<GgmlType::kQ6_K> {
  static constexpr int kElements = cpu::kQKK, kBytes = sizeof(cpu::BlockQ6_K);
  OCTO_HD static float Element(const uint8_t* p, int j) {
    const auto& b = *reinterpret_cast<const cpu::BlockQ6_K*>(p);
    const int half = j / 128, k = (j % 128) / 32, l = j % 32;
    const uint8_t ql = b.ql[64 * half + l + 32 * (k % 2)];
    const int low = k < 2 ? ql & 0xF : ql >> 4;
    const int q = (low | (((b.qh[32 * half + l] >> (2 * k)) & 3) << 4)) - 32;
    const int scale = b.scales[8 * half + l / 16 + 2 * k];
    return HalfBits(b.d) * static_cast<float>(scale) * static_cast<float>(q);
  }
};

template <>
struct Decoder<GgmlType::kIQ4_XS> {
  static constexpr int kElements = cpu::kQKK, kBytes = sizeof(cpu::BlockIq4Xs);
  OCTO_HD static float Element(const uint8_t* p, int j) {
    const auto& b = *reinterpret_cast<const cpu::BlockIq4Xs*>(p);
    const int s = j / 32;
    const float dl = HalfBits(b.d) * static_cast<float>(cpu::UnpackIq4XsScale(b, s) - 32);
    return dl * static_cast<float>(Iq4NlLevel(Nibble32(b.qs + 16 * s, j % 32)));
  }
};

template <>
struct Decoder<GgmlType::kTQ1_0> {
  static constexpr int kElements = cpu::kQKK, kBytes = sizeof(cpu::BlockTq1_0);
  OCTO_HD static float Element(const uint8_t* p, int j) {
    const auto& b = *reinterpret_cast<const cpu::BlockTq1_0*>(p);
    return static_cast<float>(cpu::Tq1Trit(b, j)) * HalfBits(b.d);
  }
};

template <>
struct Decoder<GgmlType::kTQ2_0> {
  static constexpr int kElements = cpu::kQKK, kBytes = sizeof(cpu::BlockTq2_0);
  OCTO_HD static float Element(const uint8_t* p, int j) {
    const auto& b = *reinterpret_cast<const cpu::BlockTq2_0*>(p);
    return static_cast<float>(cpu::Tq2Trit(b, j)) * HalfBits(b.d);
  }
};

// MXFP4: the doubled E2M1 value times half the E8M0 scale, as ggml writes it.
OCTO_HD constexpr int Mxfp4Level(int q) { return PackedLevel(0x0C08060403020100ull, 0xF4F8FAFCFDFEFF00ull, q); }
static_assert(SameLevels(Mxfp4Level, cpu::kMxfp4Values));

template <>
struct Decoder<GgmlType::kMXFP4> {
  static constexpr int kElements = cpu::kQK, kBytes = sizeof(cpu::BlockMxfp4);
  OCTO_HD static float Element(const uint8_t* p, int j) {
    return static_cast<float>(Mxfp4Level(Nibble32(p + 1, j))) * FloatBits(cpu::E8M0HalfBits(p[0]));
  }
};

// The IQ1-IQ3 types: ((d * ls) * factor) * L, as kernels/iq_blocks.h says.
template <typename T>
struct IqDecoder {
  static constexpr int kElements = cpu::kQKK, kBytes = sizeof(typename T::Block);
  OCTO_HD static float Element(const uint8_t* p, int j) {
    const auto& b = *reinterpret_cast<const typename T::Block*>(p);
    int L[8];
    T::Levels(b, j / 8, L);
    return (HalfBits(T::DBits(b)) * static_cast<float>(T::Scale(b, j / 8))) * T::kFactor * static_cast<float>(L[j % 8]);
  }
};
template <>
struct Decoder<GgmlType::kIQ2_XXS> : IqDecoder<cpu::iq::Iq2XxsTraits> {};
template <>
struct Decoder<GgmlType::kIQ2_XS> : IqDecoder<cpu::iq::Iq2XsTraits> {};
template <>
struct Decoder<GgmlType::kIQ2_S> : IqDecoder<cpu::iq::Iq2STraits> {};
template <>
struct Decoder<GgmlType::kIQ3_XXS> : IqDecoder<cpu::iq::Iq3XxsTraits> {};
template <>
struct Decoder<GgmlType::kIQ3_S> : IqDecoder<cpu::iq::Iq3STraits> {};
template <>
struct Decoder<GgmlType::kIQ1_S> : IqDecoder<cpu::iq::Iq1STraits> {};
template <>
struct Decoder<GgmlType::kIQ1_M> : IqDecoder<cpu::iq::Iq1MTraits> {};

// f(Decoder<type>{}) for `type`, or `unknown` for a value outside GgmlType
// (a cast of an unchecked id). The one switch over the types for every user.
template <typename R, typename F>
R WithDecoder(GgmlType type, R unknown, F&& f) {
  switch (type) {
    case GgmlType::kF32: return f(Decoder<GgmlType::kF32>{});
    case GgmlType::kF16: return f(Decoder<GgmlType::kF16>{});
    case GgmlType::kBF16: return f(Decoder<GgmlType::kBF16>{});
    case GgmlType::kQ4_0: return f(Decoder<GgmlType::kQ4_0>{});
    case GgmlType::kQ4_1: return f(Decoder<GgmlType::kQ4_1>{});
    case GgmlType::kQ5_0: return f(Decoder<GgmlType::kQ5_0>{});
    case GgmlType::kQ5_1: return f(Decoder<GgmlType::kQ5_1>{});
    case GgmlType::kQ8_0: return f(Decoder<GgmlType::kQ8_0>{});
    case GgmlType::kIQ4_NL: return f(Decoder<GgmlType::kIQ4_NL>{});
    case GgmlType::kQ2_K: return f(Decoder<GgmlType::kQ2_K>{});
    case GgmlType::kQ3_K: return f(Decoder<GgmlType::kQ3_K>{});
    case GgmlType::kQ4_K: return f(Decoder<GgmlType::kQ4_K>{});
    case GgmlType::kQ5_K: return f(Decoder<GgmlType::kQ5_K>{});
    case GgmlType::kQ6_K: return f(Decoder<GgmlType::kQ6_K>{});
    case GgmlType::kIQ4_XS: return f(Decoder<GgmlType::kIQ4_XS>{});
    case GgmlType::kTQ1_0: return f(Decoder<GgmlType::kTQ1_0>{});
    case GgmlType::kTQ2_0: return f(Decoder<GgmlType::kTQ2_0>{});
    case GgmlType::kIQ2_XXS: return f(Decoder<GgmlType::kIQ2_XXS>{});
    case GgmlType::kIQ2_XS: return f(Decoder<GgmlType::kIQ2_XS>{});
    case GgmlType::kIQ2_S: return f(Decoder<GgmlType::kIQ2_S>{});
    case GgmlType::kIQ3_XXS: return f(Decoder<GgmlType::kIQ3_XXS>{});
    case GgmlType::kIQ3_S: return f(Decoder<GgmlType::kIQ3_S>{});
    case GgmlType::kIQ1_S: return f(Decoder<GgmlType::kIQ1_S>{});
    case GgmlType::kIQ1_M: return f(Decoder<GgmlType::kIQ1_M>{});
    case GgmlType::kMXFP4: return f(Decoder<GgmlType::kMXFP4>{});
  }
  return unknown;
}

}  // namespace octo::block_decode
