// Portable dot products of the 256-wide types with Q8_K activations. Per
// super-block, exact integers:
//   isum  = sum over sub-blocks j of scale_j * sum(q_w * q_x)
//   mins  = sum over sub-blocks j of min_j * (sum of q_x over j, from bsums)
// then in float: sum += (d_x * d_w) * isum - (d_x * dmin_w) * mins.
// The largest isum (Q4_K: 256 * 63 * 15 * 127 < 2^25, Q6_K: 256 * 128 * 32
// * 127 < 2^28) fits an int32.
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/type_kernels.h"
#include "kernels/half.h"

namespace octo::cpu {

float VecDotQ2_K(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockQ2_K*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const BlockQ2_K& blk = wb[b];
    const int8_t* q8 = xb[b].qs;
    int isum = 0;
    int mins = 0;
    for (int j = 0; j < kQKK / 16; ++j) {  // sub-block j: see DequantizeRowQ2_K
      const uint8_t* q = blk.qs + 32 * (j / 8) + 16 * (j % 2);
      const int shift = 2 * ((j % 8) / 2);
      int part = 0;
      for (int l = 0; l < 16; ++l) part += ((q[l] >> shift) & 3) * q8[16 * j + l];
      isum += (blk.scales[j] & 0xF) * part;
      mins += (blk.scales[j] >> 4) * xb[b].bsums[j];
    }
    sum += xb[b].d * Fp16ToFp32(blk.d) * static_cast<float>(isum) -
           xb[b].d * Fp16ToFp32(blk.dmin) * static_cast<float>(mins);
  }
  return sum;
}

float VecDotQ3_K(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockQ3_K*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const BlockQ3_K& blk = wb[b];
    const int8_t* q8 = xb[b].qs;
    int isum = 0;
    for (int j = 0; j < kQKK / 16; ++j) {  // sub-block j: see DequantizeRowQ3_K
      const int half = j / 8;
      const int s = (j % 8) / 2;
      const int l0 = 16 * (j % 2);
      const uint8_t hbit = static_cast<uint8_t>(1u << (4 * half + s));
      int part = 0;
      for (int l = l0; l < l0 + 16; ++l) {
        const int q = ((blk.qs[32 * half + l] >> (2 * s)) & 3) - ((blk.hmask[l] & hbit) ? 0 : 4);
        part += q * q8[16 * j + (l - l0)];
      }
      isum += UnpackQ3KScale(blk.scales, j) * part;
    }
    sum += xb[b].d * Fp16ToFp32(blk.d) * static_cast<float>(isum);
  }
  return sum;
}

namespace {

// Q4_K and Q5_K share everything but the 5th bit.
template <typename Block, bool kFifthBit>
float DotQ45K(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const Block*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const Block& blk = wb[b];
    const int8_t* q8 = xb[b].qs;
    int isum = 0;
    int mins = 0;
    for (int j = 0; j < kQKK / 32; ++j) {
      int sc, m;
      UnpackQ4KScaleMin(blk.scales, j, &sc, &m);
      const uint8_t* q = blk.qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      int part = 0;
      for (int l = 0; l < 32; ++l) {
        int v = (q[l] >> shift) & 0xF;
        if constexpr (kFifthBit) v += ((blk.qh[l] >> j) & 1) << 4;
        part += v * q8[32 * j + l];
      }
      isum += sc * part;
      mins += m * (xb[b].bsums[2 * j] + xb[b].bsums[2 * j + 1]);
    }
    sum += xb[b].d * Fp16ToFp32(blk.d) * static_cast<float>(isum) -
           xb[b].d * Fp16ToFp32(blk.dmin) * static_cast<float>(mins);
  }
  return sum;
}

}  // namespace

float VecDotQ4_K(const void* w, const void* x, int64_t cols) { return DotQ45K<BlockQ4_K, false>(w, x, cols); }

float VecDotQ5_K(const void* w, const void* x, int64_t cols) { return DotQ45K<BlockQ5_K, true>(w, x, cols); }

float VecDotQ6_K(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const BlockQ6_K& blk = wb[b];
    int isum = 0;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = blk.ql + 64 * half;
      const uint8_t* qh = blk.qh + 32 * half;
      const int8_t* q8 = xb[b].qs + 128 * half;
      // Four 32-value groups (offsets 0, 32, 64, 96), two sub-blocks each.
      int part[8] = {};
      for (int l = 0; l < 32; ++l) {
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        const int is = l / 16;
        part[is + 0] += q1 * q8[l];
        part[is + 2] += q2 * q8[l + 32];
        part[is + 4] += q3 * q8[l + 64];
        part[is + 6] += q4 * q8[l + 96];
      }
      for (int k = 0; k < 8; ++k) isum += blk.scales[8 * half + k] * part[k];
    }
    sum += xb[b].d * Fp16ToFp32(blk.d) * static_cast<float>(isum);
  }
  return sum;
}

float VecDotIq4Xs(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockIq4Xs*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const BlockIq4Xs& blk = wb[b];
    const int8_t* q8 = xb[b].qs;
    int isum = 0;
    for (int j = 0; j < kQKK / 32; ++j) {
      const uint8_t* qs = blk.qs + 16 * j;
      int part = 0;
      for (int l = 0; l < 16; ++l) {
        part += kIq4NlValues[qs[l] & 0xF] * q8[32 * j + l];
        part += kIq4NlValues[qs[l] >> 4] * q8[32 * j + l + 16];
      }
      isum += (UnpackIq4XsScale(blk, j) - 32) * part;
    }
    sum += xb[b].d * Fp16ToFp32(blk.d) * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace octo::cpu
