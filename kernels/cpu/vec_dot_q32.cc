// Portable dot products of the 32-wide block types with Q8_0 / Q8_1
// activations. Per block: the exact integer sum of q_w * q_x, then
//   sum += (d_w * d_x) * isum            (Q4_0, Q5_0, Q8_0, IQ4_NL)
//   sum += (d_w * d_x) * isum + m_w * s_x  (Q4_1, Q5_1: s_x = d_x * sum q_x)
#include <cstring>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/type_kernels.h"
#include "kernels/half.h"

namespace octo::cpu {
namespace {

inline float Scale(uint16_t d_w, uint16_t d_x) { return Fp16ToFp32(d_w) * Fp16ToFp32(d_x); }

inline uint32_t LoadQh(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, sizeof(v));
  return v;
}

}  // namespace

float VecDotQ4_0(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockQ4_0*>(w);
  const auto* xb = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < cols / kQK; ++b) {
    int isum = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      isum += ((wb[b].qs[j] & 0xF) - 8) * xb[b].qs[j];
      isum += ((wb[b].qs[j] >> 4) - 8) * xb[b].qs[j + kQK / 2];
    }
    sum += Scale(wb[b].d, xb[b].d) * static_cast<float>(isum);
  }
  return sum;
}

float VecDotQ4_1(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockQ4_1*>(w);
  const auto* xb = static_cast<const BlockQ8_1*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < cols / kQK; ++b) {
    int isum = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      isum += (wb[b].qs[j] & 0xF) * xb[b].qs[j];
      isum += (wb[b].qs[j] >> 4) * xb[b].qs[j + kQK / 2];
    }
    sum += Scale(wb[b].d, xb[b].d) * static_cast<float>(isum) +
           Fp16ToFp32(wb[b].m) * Fp16ToFp32(xb[b].s);
  }
  return sum;
}

float VecDotQ5_0(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockQ5_0*>(w);
  const auto* xb = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < cols / kQK; ++b) {
    const uint32_t qh = LoadQh(wb[b].qh);
    int isum = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = ((wb[b].qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4)) - 16;
      const int hi = ((wb[b].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4)) - 16;
      isum += lo * xb[b].qs[j] + hi * xb[b].qs[j + kQK / 2];
    }
    sum += Scale(wb[b].d, xb[b].d) * static_cast<float>(isum);
  }
  return sum;
}

float VecDotQ5_1(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockQ5_1*>(w);
  const auto* xb = static_cast<const BlockQ8_1*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < cols / kQK; ++b) {
    const uint32_t qh = LoadQh(wb[b].qh);
    int isum = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (wb[b].qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (wb[b].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      isum += lo * xb[b].qs[j] + hi * xb[b].qs[j + kQK / 2];
    }
    sum += Scale(wb[b].d, xb[b].d) * static_cast<float>(isum) +
           Fp16ToFp32(wb[b].m) * Fp16ToFp32(xb[b].s);
  }
  return sum;
}

float VecDotQ8_0(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockQ8_0*>(w);
  const auto* xb = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < cols / kQK; ++b) {
    int isum = 0;
    for (int j = 0; j < kQK; ++j) isum += wb[b].qs[j] * xb[b].qs[j];
    sum += Scale(wb[b].d, xb[b].d) * static_cast<float>(isum);
  }
  return sum;
}

namespace {

// A 32-wide nibble block through a 16-entry level table (IQ4_NL, MXFP4)
// against Q8_0: the exact integer sum, times the block's scale (scale(w, x)).
template <typename Block, typename ScaleFn>
float NibbleLevelDot(const void* w, const void* x, int64_t cols, const int8_t* levels, ScaleFn scale) {
  const auto* wb = static_cast<const Block*>(w);
  const auto* xb = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < cols / kQK; ++b) {
    int isum = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      isum += levels[wb[b].qs[j] & 0xF] * xb[b].qs[j];
      isum += levels[wb[b].qs[j] >> 4] * xb[b].qs[j + kQK / 2];
    }
    sum += scale(wb[b], xb[b]) * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace

float VecDotIq4Nl(const void* w, const void* x, int64_t cols) {
  return NibbleLevelDot<BlockIq4Nl>(w, x, cols, kIq4NlValues,
                                    [](const BlockIq4Nl& b, const BlockQ8_0& q) { return Scale(b.d, q.d); });
}

// MXFP4 as ggml's CPU backend: half the E8M0 scale times fp16(d_x).
float VecDotMxfp4(const void* w, const void* x, int64_t cols) {
  return NibbleLevelDot<BlockMxfp4>(w, x, cols, kMxfp4Values, [](const BlockMxfp4& b, const BlockQ8_0& q) {
    return E8M0Half(b.e) * Fp16ToFp32(q.d);
  });
}

}  // namespace octo::cpu
