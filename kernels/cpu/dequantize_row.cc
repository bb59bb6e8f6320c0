// Row dequantizers: ggml's dequantize_row_* value for value. The float
// expressions keep ggml's evaluation order (e.g. (d * sc) * q - d_min * m)
// and the library builds with -ffp-contract=off, so no product is fused into
// an add: the results are bit-identical to ggml's (which builds these without
// FMA).
#include <cstring>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/type_kernels.h"
#include "kernels/half.h"

namespace octo::cpu {

void DequantizeRowF32(const void* w, int64_t cols, float* out) {
  std::memcpy(out, w, static_cast<size_t>(cols) * sizeof(float));
}

void DequantizeRowF16(const void* w, int64_t cols, float* out) {
  const auto* h = static_cast<const uint16_t*>(w);
  for (int64_t i = 0; i < cols; ++i) out[i] = Fp16ToFp32(h[i]);
}

void DequantizeRowBf16(const void* w, int64_t cols, float* out) {
  const auto* h = static_cast<const uint16_t*>(w);
  for (int64_t i = 0; i < cols; ++i) out[i] = Bf16ToFp32(h[i]);
}

void DequantizeRowQ4_0(const void* w, int64_t cols, float* out) {
  const auto* blocks = static_cast<const BlockQ4_0*>(w);
  for (int64_t b = 0; b < cols / kQK; ++b, out += kQK) {
    const float d = Fp16ToFp32(blocks[b].d);
    for (int j = 0; j < kQK / 2; ++j) {
      out[j] = static_cast<float>((blocks[b].qs[j] & 0xF) - 8) * d;
      out[j + kQK / 2] = static_cast<float>((blocks[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantizeRowQ4_1(const void* w, int64_t cols, float* out) {
  const auto* blocks = static_cast<const BlockQ4_1*>(w);
  for (int64_t b = 0; b < cols / kQK; ++b, out += kQK) {
    const float d = Fp16ToFp32(blocks[b].d);
    const float m = Fp16ToFp32(blocks[b].m);
    for (int j = 0; j < kQK / 2; ++j) {
      out[j] = static_cast<float>(blocks[b].qs[j] & 0xF) * d + m;
      out[j + kQK / 2] = static_cast<float>(blocks[b].qs[j] >> 4) * d + m;
    }
  }
}

namespace {

// Element j's 5-bit quant of a Q5_0/Q5_1 block (0..31).
inline int Q5Value(const uint8_t* qs, uint32_t qh, int j) {
  const int nibble = j < kQK / 2 ? qs[j] & 0xF : qs[j - kQK / 2] >> 4;
  return nibble | static_cast<int>(((qh >> j) & 1u) << 4);
}

}  // namespace

void DequantizeRowQ5_0(const void* w, int64_t cols, float* out) {
  const auto* blocks = static_cast<const BlockQ5_0*>(w);
  for (int64_t b = 0; b < cols / kQK; ++b, out += kQK) {
    const float d = Fp16ToFp32(blocks[b].d);
    uint32_t qh;
    std::memcpy(&qh, blocks[b].qh, sizeof(qh));
    for (int j = 0; j < kQK; ++j) out[j] = static_cast<float>(Q5Value(blocks[b].qs, qh, j) - 16) * d;
  }
}

void DequantizeRowQ5_1(const void* w, int64_t cols, float* out) {
  const auto* blocks = static_cast<const BlockQ5_1*>(w);
  for (int64_t b = 0; b < cols / kQK; ++b, out += kQK) {
    const float d = Fp16ToFp32(blocks[b].d);
    const float m = Fp16ToFp32(blocks[b].m);
    uint32_t qh;
    std::memcpy(&qh, blocks[b].qh, sizeof(qh));
    for (int j = 0; j < kQK; ++j) out[j] = static_cast<float>(Q5Value(blocks[b].qs, qh, j)) * d + m;
  }
}

void DequantizeRowQ8_0(const void* w, int64_t cols, float* out) {
  const auto* blocks = static_cast<const BlockQ8_0*>(w);
  for (int64_t b = 0; b < cols / kQK; ++b, out += kQK) {
    const float d = Fp16ToFp32(blocks[b].d);
    for (int j = 0; j < kQK; ++j) out[j] = static_cast<float>(blocks[b].qs[j]) * d;
  }
}

void DequantizeRowIq4Nl(const void* w, int64_t cols, float* out) {
  const auto* blocks = static_cast<const BlockIq4Nl*>(w);
  for (int64_t b = 0; b < cols / kQK; ++b, out += kQK) {
    const float d = Fp16ToFp32(blocks[b].d);
    for (int j = 0; j < kQK / 2; ++j) {
      out[j] = d * static_cast<float>(kIq4NlValues[blocks[b].qs[j] & 0xF]);
      out[j + kQK / 2] = d * static_cast<float>(kIq4NlValues[blocks[b].qs[j] >> 4]);
    }
  }
}

void DequantizeRowQ2_K(const void* w, int64_t cols, float* out) {
  const auto* blocks = static_cast<const BlockQ2_K*>(w);
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const BlockQ2_K& blk = blocks[b];
    const float d = Fp16ToFp32(blk.d);
    const float d_min = Fp16ToFp32(blk.dmin);
    // Sub-block j (16 values) = half j / 8, shift 2 * ((j % 8) / 2), bytes
    // 16 * (j % 2) .. + 15 of that half's 32.
    for (int j = 0; j < kQKK / 16; ++j, out += 16) {
      const uint8_t* q = blk.qs + 32 * (j / 8) + 16 * (j % 2);
      const int shift = 2 * ((j % 8) / 2);
      const float dl = d * static_cast<float>(blk.scales[j] & 0xF);
      const float ml = d_min * static_cast<float>(blk.scales[j] >> 4);
      for (int l = 0; l < 16; ++l) out[l] = dl * static_cast<float>((q[l] >> shift) & 3) - ml;
    }
  }
}

void DequantizeRowQ3_K(const void* w, int64_t cols, float* out) {
  const auto* blocks = static_cast<const BlockQ3_K*>(w);
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const BlockQ3_K& blk = blocks[b];
    const float d = Fp16ToFp32(blk.d);
    for (int j = 0; j < kQKK / 16; ++j, out += 16) {
      const int half = j / 8;
      const int s = (j % 8) / 2;          // which 2-bit field of the qs bytes
      const int l0 = 16 * (j % 2);        // first byte of the 32 within the half
      const uint8_t hbit = static_cast<uint8_t>(1u << (4 * half + s));
      const float dl = d * static_cast<float>(UnpackQ3KScale(blk.scales, j));
      for (int l = l0; l < l0 + 16; ++l) {
        const int q = ((blk.qs[32 * half + l] >> (2 * s)) & 3) - ((blk.hmask[l] & hbit) ? 0 : 4);
        out[l - l0] = dl * static_cast<float>(q);
      }
    }
  }
}

namespace {

// Q4_K and Q5_K: 8 sub-blocks of 32 with a 6-bit scale and min each; Q5_K
// adds a fifth bit per quant from qh (bit j for sub-block j).
template <typename Block, bool kFifthBit>
void DequantizeRowQ45K(const void* w, int64_t cols, float* out) {
  const auto* blocks = static_cast<const Block*>(w);
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const Block& blk = blocks[b];
    const float d = Fp16ToFp32(blk.d);
    const float d_min = Fp16ToFp32(blk.dmin);
    for (int j = 0; j < kQKK / 32; ++j, out += 32) {
      int sc, m;
      UnpackQ4KScaleMin(blk.scales, j, &sc, &m);
      const float dl = d * static_cast<float>(sc);
      const float ml = d_min * static_cast<float>(m);
      const uint8_t* q = blk.qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; ++l) {
        int v = (q[l] >> shift) & 0xF;
        if constexpr (kFifthBit) v += ((blk.qh[l] >> j) & 1) << 4;
        out[l] = dl * static_cast<float>(v) - ml;
      }
    }
  }
}

}  // namespace

void DequantizeRowQ4_K(const void* w, int64_t cols, float* out) { DequantizeRowQ45K<BlockQ4_K, false>(w, cols, out); }

void DequantizeRowQ5_K(const void* w, int64_t cols, float* out) { DequantizeRowQ45K<BlockQ5_K, true>(w, cols, out); }

void DequantizeRowQ6_K(const void* w, int64_t cols, float* out) {
  const auto* blocks = static_cast<const BlockQ6_K*>(w);
  for (int64_t b = 0; b < cols / kQKK; ++b, out += kQKK) {
    const BlockQ6_K& blk = blocks[b];
    const float d = Fp16ToFp32(blk.d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = blk.ql + 64 * half;
      const uint8_t* qh = blk.qh + 32 * half;
      const int8_t* sc = blk.scales + 8 * half;
      float* y = out + 128 * half;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

void DequantizeRowIq4Xs(const void* w, int64_t cols, float* out) {
  const auto* blocks = static_cast<const BlockIq4Xs*>(w);
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const BlockIq4Xs& blk = blocks[b];
    const float d = Fp16ToFp32(blk.d);
    for (int j = 0; j < kQKK / 32; ++j, out += 32) {
      const float dl = d * static_cast<float>(UnpackIq4XsScale(blk, j) - 32);
      const uint8_t* qs = blk.qs + 16 * j;
      for (int l = 0; l < 16; ++l) {
        out[l] = dl * static_cast<float>(kIq4NlValues[qs[l] & 0xF]);
        out[l + 16] = dl * static_cast<float>(kIq4NlValues[qs[l] >> 4]);
      }
    }
  }
}

// TQ1_0 / TQ2_0: (float)(digit - 1) * d, as ggml writes it, in element order.
void DequantizeRowTq1_0(const void* w, int64_t cols, float* out) {
  const auto* blocks = static_cast<const BlockTq1_0*>(w);
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const float d = Fp16ToFp32(blocks[b].d);
    for (int j = 0; j < kQKK; ++j) out[j] = static_cast<float>(Tq1Trit(blocks[b], j)) * d;
    out += kQKK;
  }
}

void DequantizeRowTq2_0(const void* w, int64_t cols, float* out) {
  const auto* blocks = static_cast<const BlockTq2_0*>(w);
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const float d = Fp16ToFp32(blocks[b].d);
    for (int j = 0; j < kQKK; ++j) out[j] = static_cast<float>(Tq2Trit(blocks[b], j)) * d;
    out += kQKK;
  }
}

void DequantizeRowMxfp4(const void* w, int64_t cols, float* out) {
  const auto* blocks = static_cast<const BlockMxfp4*>(w);
  for (int64_t b = 0; b < cols / kQK; ++b, out += kQK) {
    const float d = E8M0Half(blocks[b].e);
    for (int j = 0; j < kQK / 2; ++j) {
      out[j] = static_cast<float>(kMxfp4Values[blocks[b].qs[j] & 0xF]) * d;
      out[j + kQK / 2] = static_cast<float>(kMxfp4Values[blocks[b].qs[j] >> 4]) * d;
    }
  }
}

}  // namespace octo::cpu
