// fp16 and bf16 <-> fp32, bit-exact and portable (host code).
//
// fp16 is IEEE 754 binary16; fp32 -> fp16 rounds to nearest, ties to even,
// as the F16C instruction (and so llama.cpp on x86) does. bf16 is the top
// half of an fp32; fp32 -> bf16 rounds to nearest even and keeps NaN a NaN,
// as ggml does. Values are passed around as uint16_t bit patterns.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace octo {

inline float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {  // inf / NaN
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {  // normal
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {  // signed zero
    bits = sign;
  } else {  // subnormal: value = mant * 2^-24, exact in fp32
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t Fp32ToFp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf / NaN (NaN stays a quiet NaN)
    return sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u);
  }
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {  // below 2^-14: subnormal or zero in fp16
    // Scale to units of 2^-24 and round to nearest even in float.
    const float scaled = std::bit_cast<float>(abs) * 0x1p24f;
    // Adding 2^23 forces rounding at the integer position (ties to even).
    const float rounded = (scaled + 0x1p23f) - 0x1p23f;
    return sign | static_cast<uint16_t>(rounded);
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to even.
  const uint32_t mant_rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return sign | static_cast<uint16_t>((mant_rounded - 0x38000000u) >> 13);
}

inline float Bf16ToFp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t Fp32ToBf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 64u);  // quiet NaN
  return static_cast<uint16_t>((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

}  // namespace octo
