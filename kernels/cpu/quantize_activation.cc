// Portable activation encoders (the contract is in quantize_activation.h).
#include "kernels/cpu/quantize_activation.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/half.h"

namespace octo::cpu {

const char* ActTypeName(ActType type) {
  switch (type) {
    case ActType::kF32: return "F32";
    case ActType::kF16: return "F16";
    case ActType::kBF16: return "BF16";
    case ActType::kQ8_0: return "Q8_0";
    case ActType::kQ8_1: return "Q8_1";
    case ActType::kQ8_K: return "Q8_K";
  }
  return "?";
}

int ActBlockSize(ActType type) {
  switch (type) {
    case ActType::kQ8_0:
    case ActType::kQ8_1: return kQK;
    case ActType::kQ8_K: return kQKK;
    default: return 1;
  }
}

int64_t ActRowBytes(ActType type, int64_t cols) {
  switch (type) {
    case ActType::kF32: return cols * 4;
    case ActType::kF16:
    case ActType::kBF16: return cols * 2;
    case ActType::kQ8_0: return Q8_0SideOffset(cols) + cols / kQK * static_cast<int64_t>(sizeof(Q8_0Side));
    case ActType::kQ8_1: return cols / kQK * static_cast<int64_t>(sizeof(BlockQ8_1));
    case ActType::kQ8_K: return cols / kQKK * static_cast<int64_t>(sizeof(BlockQ8_K));
  }
  return 0;
}

namespace {

// The shared part of Q8_0 and Q8_1: scale and quants of one 32-value block.
// Returns the fp32 d (Q8_1 needs it unrounded for s).
float QuantizeBlock8(const float* x, uint16_t* d_out, int8_t* qs) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  *d_out = Fp32ToFp16(d);
  for (int j = 0; j < kQK; ++j) qs[j] = static_cast<int8_t>(NearestInt(x[j] * id));
  return d;
}

}  // namespace

void FillQ8_0Side(int64_t cols, void* row) {
  const auto* blocks = static_cast<const BlockQ8_0*>(row);
  auto* side = reinterpret_cast<Q8_0Side*>(static_cast<uint8_t*>(row) + Q8_0SideOffset(cols));
  // The padding between the blocks and the table: zeros, so a row's bytes
  // are fully determined by x.
  const int64_t blocks_end = cols / kQK * static_cast<int64_t>(sizeof(BlockQ8_0));
  std::memset(static_cast<uint8_t*>(row) + blocks_end, 0, static_cast<size_t>(Q8_0SideOffset(cols) - blocks_end));
  for (int64_t b = 0; b < cols / kQK; ++b) {
    side[b].d = Fp16ToFp32(blocks[b].d);
    for (int k = 0; k < kQK / 4; ++k) {
      const int8_t* q = blocks[b].qs + 4 * k;
      side[b].sums4[k] = q[0] + q[1] + q[2] + q[3];
    }
  }
}

void QuantizeRowQ8_0(const float* x, int64_t cols, void* out) {
  auto* y = static_cast<BlockQ8_0*>(out);
  for (int64_t b = 0; b < cols / kQK; ++b) QuantizeBlock8(x + b * kQK, &y[b].d, y[b].qs);
  FillQ8_0Side(cols, out);
}

void QuantizeRowQ8_1(const float* x, int64_t cols, void* out) {
  auto* y = static_cast<BlockQ8_1*>(out);
  for (int64_t b = 0; b < cols / kQK; ++b) {
    const float d = QuantizeBlock8(x + b * kQK, &y[b].d, y[b].qs);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) sum += y[b].qs[j];
    y[b].s = Fp32ToFp16(d * static_cast<float>(sum));
  }
}

void QuantizeRowQ8_K(const float* x, int64_t cols, void* out) {
  auto* y = static_cast<BlockQ8_K*>(out);
  for (int64_t b = 0; b < cols / kQKK; ++b, x += kQKK) {
    BlockQ8_K& blk = y[b];
    float max = 0.0f;
    float amax = 0.0f;
    for (int j = 0; j < kQKK; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      blk.d = 0.0f;
      std::memset(blk.qs, 0, sizeof(blk.qs));
      std::memset(blk.bsums, 0, sizeof(blk.bsums));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQKK; ++j) {
      blk.qs[j] = static_cast<int8_t>(std::min(127, NearestInt(iscale * x[j])));
    }
    for (int j = 0; j < kQKK / 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += blk.qs[16 * j + i];
      blk.bsums[j] = static_cast<int16_t>(sum);
    }
    blk.d = 1.0f / iscale;
  }
}

void QuantizeRowF16(const float* x, int64_t cols, void* out) {
  auto* y = static_cast<uint16_t*>(out);
  for (int64_t i = 0; i < cols; ++i) y[i] = Fp32ToFp16(x[i]);
}

void QuantizeRowBf16(const float* x, int64_t cols, void* out) {
  auto* y = static_cast<uint16_t*>(out);
  for (int64_t i = 0; i < cols; ++i) y[i] = Fp32ToBf16(x[i]);
}

void QuantizeActivationRow(ActType type, const float* x, int64_t cols, void* out, Simd simd) {
#if defined(__x86_64__)
  const bool avx2 = simd == Simd::kAvx2;
#else
  const bool avx2 = false;
#endif
  switch (type) {
    case ActType::kF32:
      std::memcpy(out, x, static_cast<size_t>(cols) * sizeof(float));
      return;
#if defined(__x86_64__)
    case ActType::kF16: return avx2 ? QuantizeRowF16Avx2(x, cols, out) : QuantizeRowF16(x, cols, out);
    case ActType::kQ8_0: return avx2 ? QuantizeRowQ8_0Avx2(x, cols, out) : QuantizeRowQ8_0(x, cols, out);
    case ActType::kQ8_1: return avx2 ? QuantizeRowQ8_1Avx2(x, cols, out) : QuantizeRowQ8_1(x, cols, out);
#else
    case ActType::kF16: return QuantizeRowF16(x, cols, out);
    case ActType::kQ8_0: return QuantizeRowQ8_0(x, cols, out);
    case ActType::kQ8_1: return QuantizeRowQ8_1(x, cols, out);
#endif
    // llama.cpp's x86 build has no SIMD version of these two either.
    case ActType::kQ8_K: return QuantizeRowQ8_K(x, cols, out);
    case ActType::kBF16: return QuantizeRowBf16(x, cols, out);
  }
  (void)avx2;
}

void DequantizeActivationRow(ActType type, const void* in, int64_t cols, float* out) {
  switch (type) {
    case ActType::kF32:
      std::memcpy(out, in, static_cast<size_t>(cols) * sizeof(float));
      return;
    case ActType::kF16:
      for (int64_t i = 0; i < cols; ++i) out[i] = Fp16ToFp32(static_cast<const uint16_t*>(in)[i]);
      return;
    case ActType::kBF16:
      for (int64_t i = 0; i < cols; ++i) out[i] = Bf16ToFp32(static_cast<const uint16_t*>(in)[i]);
      return;
    case ActType::kQ8_0:
      for (int64_t b = 0; b < cols / kQK; ++b) {
        const BlockQ8_0& blk = static_cast<const BlockQ8_0*>(in)[b];
        for (int j = 0; j < kQK; ++j) out[b * kQK + j] = Fp16ToFp32(blk.d) * blk.qs[j];
      }
      return;
    case ActType::kQ8_1:
      for (int64_t b = 0; b < cols / kQK; ++b) {
        const BlockQ8_1& blk = static_cast<const BlockQ8_1*>(in)[b];
        for (int j = 0; j < kQK; ++j) out[b * kQK + j] = Fp16ToFp32(blk.d) * blk.qs[j];
      }
      return;
    case ActType::kQ8_K:
      for (int64_t b = 0; b < cols / kQKK; ++b) {
        const BlockQ8_K& blk = static_cast<const BlockQ8_K*>(in)[b];
        for (int j = 0; j < kQKK; ++j) out[b * kQKK + j] = blk.d * blk.qs[j];
      }
      return;
  }
}

}  // namespace octo::cpu
