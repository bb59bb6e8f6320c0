// Random weight matrices in every block encoding, for the MatMul tests and
// benchmark: random bytes everywhere (every quant pattern, every packed
// scale), then each fp16 scale field overwritten with a finite value, so a
// block is valid and its numbers stay in a realistic range.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quantize_activation.h"
#include "kernels/half.h"
#include "kernels/iq_blocks.h"
#include "storage/ggml_type.h"

namespace octo::testing {

// Byte offsets of the fp16 scale fields (d, m, dmin) inside one block.
inline std::vector<size_t> Fp16FieldOffsets(GgmlType type) {
  using namespace octo::cpu;
  switch (type) {
    case GgmlType::kQ4_0: return {offsetof(BlockQ4_0, d)};
    case GgmlType::kQ4_1: return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
    case GgmlType::kQ5_0: return {offsetof(BlockQ5_0, d)};
    case GgmlType::kQ5_1: return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
    case GgmlType::kQ8_0: return {offsetof(BlockQ8_0, d)};
    case GgmlType::kQ2_K: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case GgmlType::kQ3_K: return {offsetof(BlockQ3_K, d)};
    case GgmlType::kQ4_K: return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case GgmlType::kQ5_K: return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case GgmlType::kQ6_K: return {offsetof(BlockQ6_K, d)};
    case GgmlType::kIQ4_NL: return {offsetof(BlockIq4Nl, d)};
    case GgmlType::kIQ4_XS: return {offsetof(BlockIq4Xs, d)};
    case GgmlType::kTQ1_0: return {offsetof(BlockTq1_0, d)};
    case GgmlType::kTQ2_0: return {offsetof(BlockTq2_0, d)};
    case GgmlType::kIQ2_XXS: return {offsetof(BlockIq2Xxs, d)};
    case GgmlType::kIQ2_XS: return {offsetof(BlockIq2Xs, d)};
    case GgmlType::kIQ2_S: return {offsetof(BlockIq2S, d)};
    case GgmlType::kIQ3_XXS: return {offsetof(BlockIq3Xxs, d)};
    case GgmlType::kIQ3_S: return {offsetof(BlockIq3S, d)};
    case GgmlType::kIQ1_S: return {offsetof(BlockIq1S, d)};
    default: return {};
  }
}

// A scale of magnitude 2^-10 .. 2^-4 and either sign, as fp16 bits.
inline uint16_t RandomScale(std::mt19937& rng) {
  std::uniform_real_distribution<float> exponent(-10.0f, -4.0f);
  const float magnitude = std::exp2(exponent(rng));
  return Fp32ToFp16(rng() % 2 ? magnitude : -magnitude);
}

// rows x cols of `type`, as the bytes of a GGUF tensor.
inline std::vector<uint8_t> RandomWeights(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  const GgmlTypeInfo& info = GgmlTypeInfoOf(type);
  const int64_t n_blocks = rows * (cols / info.block_size);
  std::vector<uint8_t> bytes(static_cast<size_t>(n_blocks * info.type_size));
  std::normal_distribution<float> normal(0.0f, 0.5f);
  if (type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16) {
    for (int64_t i = 0; i < rows * cols; ++i) {
      const float v = normal(rng);
      if (type == GgmlType::kF32) {
        std::memcpy(bytes.data() + 4 * i, &v, 4);
      } else {
        const uint16_t h = type == GgmlType::kF16 ? Fp32ToFp16(v) : Fp32ToBf16(v);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
    }
    return bytes;
  }
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  const std::vector<size_t> fields = Fp16FieldOffsets(type);
  for (int64_t blk = 0; blk < n_blocks; ++blk) {
    for (size_t offset : fields) {
      const uint16_t scale = RandomScale(rng);
      std::memcpy(bytes.data() + blk * info.type_size + offset, &scale, 2);
    }
    if (type == GgmlType::kMXFP4) bytes[blk * info.type_size] = static_cast<uint8_t>(117 + rng() % 4);  // E8M0 scale
    if (type == GgmlType::kIQ1_M) {  // d's fp16 bits in the scale words' top nibbles
      octo::cpu::iq::Iq1MTraits::SetDBits(bytes.data() + blk * info.type_size, RandomScale(rng));
    }
  }
  return bytes;
}

// Activation-like values: normal, with an occasional outlier 20x larger.
inline std::vector<float> RandomActivations(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng) * (rng() % 64 == 0 ? 20.0f : 1.0f);
  return x;
}

// The exact dot product, in double, of one weight row and one encoded
// activation row, from the values they stand for: w (cols) from
// DequantizeRows, x_hat (cols) from DequantizeActivationRow of x_enc.
// abs_sum = sum |w_i * x_hat_i|, the scale of the float rounding errors.
//
// One correction: a Q8_1 block's s is d * sum(q) rounded to fp16, and the
// Q4_1/Q5_1 dot products use it for the weights' min term (m * s), as
// llama.cpp does; so for those types the exact value adds, per block,
// m * (s - d * sum(q)), with m read from the weight row's block.
struct ExactDot {
  double value = 0.0;
  double abs_sum = 0.0;
};

inline ExactDot ReferenceDot(GgmlType type, const float* w, const uint8_t* w_row_bytes, cpu::ActType act,
                             const void* x_enc, const float* x_hat, int64_t cols) {
  ExactDot dot;
  for (int64_t i = 0; i < cols; ++i) {
    const double term = static_cast<double>(w[i]) * x_hat[i];
    dot.value += term;
    dot.abs_sum += std::fabs(term);
  }
  if (act == cpu::ActType::kQ8_1) {
    const GgmlTypeInfo& info = GgmlTypeInfoOf(type);
    const auto* xb = static_cast<const cpu::BlockQ8_1*>(x_enc);
    for (int64_t b = 0; b < cols / cpu::kQK; ++b) {
      // Q4_1 and Q5_1 both start with fp16 d, fp16 m.
      uint16_t m_bits;
      std::memcpy(&m_bits, w_row_bytes + b * info.type_size + 2, 2);
      int sum_q = 0;
      for (int j = 0; j < cpu::kQK; ++j) sum_q += xb[b].qs[j];
      const double exact_s = static_cast<double>(Fp16ToFp32(xb[b].d)) * sum_q;
      dot.value += static_cast<double>(Fp16ToFp32(m_bits)) * (Fp16ToFp32(xb[b].s) - exact_s);
    }
  }
  return dot;
}

}  // namespace octo::testing
