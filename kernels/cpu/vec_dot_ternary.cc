// Dot products of the ternary types (TQ1_0, TQ2_0) with Q8_K activations,
// as llama.cpp's CPU backend takes them: per 256-element block the trits
// times the 8-bit activations summed exactly in integers, then
// (float) sum * (d_w * d_x), blocks added in order.
#include "kernels/cpu/type_kernels.h"

#include <cmath>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/half.h"

namespace octo::cpu {
namespace {

// TQ1_0's qs bytes hold five digits and its qh bytes four; digit n of every
// byte is a run of elements (quant_blocks.h), so the block is walked byte
// run by byte run rather than element by element.
int Tq1BlockSum(const BlockTq1_0& b, const int8_t* q8) {
  int sum = 0;
  for (int n = 0; n < 5; ++n) {
    for (int m = 0; m < 32; ++m) sum += (Tq1Digit(b.qs[m], n) - 1) * q8[32 * n + m];
    for (int m = 0; m < 16; ++m) sum += (Tq1Digit(b.qs[32 + m], n) - 1) * q8[160 + 16 * n + m];
  }
  for (int n = 0; n < 4; ++n) {
    for (int m = 0; m < 4; ++m) sum += (Tq1Digit(b.qh[m], n) - 1) * q8[240 + 4 * n + m];
  }
  return sum;
}

int Tq2BlockSum(const BlockTq2_0& b, const int8_t* q8) {
  int sum = 0;
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 4; ++l) {
      for (int m = 0; m < 32; ++m) sum += (((b.qs[32 * half + m] >> (2 * l)) & 3) - 1) * q8[128 * half + 32 * l + m];
    }
  }
  return sum;
}

// llama.cpp's AVX2 order: eight int32 lanes per block, lane m holding the
// products (t + 1) * q8 of the elements at positions 4m..4m+3 of every
// 32-element run, less the activations of elements 32m..32m+31 (its bsums
// 2m and 2m+1; the sum over the lanes is the block's exact sum); each lane
// converted to float and multiplied by d_w * d_x, accumulated per lane over
// the blocks, then added pairwise: ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)).
template <typename Trit>
float LaneDot(int64_t blocks, const BlockQ8_K* x, Trit trit_and_scale) {
  float lanes[8] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    int32_t lane[8] = {};
    for (int e = 0; e < kQKK; ++e) lane[(e % 32) / 4] += (trit_and_scale.Trit(b, e) + 1) * x[b].qs[e];
    for (int m = 0; m < 8; ++m) lane[m] -= x[b].bsums[2 * m] + x[b].bsums[2 * m + 1];
    const float d = x[b].d * trit_and_scale.Scale(b);
    for (int m = 0; m < 8; ++m) lanes[m] = std::fma(static_cast<float>(lane[m]), d, lanes[m]);
  }
  return ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
}

template <typename Block, int (*kTrit)(const Block&, int)>
struct Trits {
  const Block* w;
  int Trit(int64_t b, int e) const { return kTrit(w[b], e); }
  float Scale(int64_t b) const { return Fp16ToFp32(w[b].d); }
};

}  // namespace

float VecDotTq1_0Lanes(const void* w, const void* x, int64_t cols) {
  return LaneDot(cols / kQKK, static_cast<const BlockQ8_K*>(x),
                 Trits<BlockTq1_0, Tq1Trit>{static_cast<const BlockTq1_0*>(w)});
}

float VecDotTq2_0Lanes(const void* w, const void* x, int64_t cols) {
  return LaneDot(cols / kQKK, static_cast<const BlockQ8_K*>(x),
                 Trits<BlockTq2_0, Tq2Trit>{static_cast<const BlockTq2_0*>(w)});
}

float VecDotTq1_0(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockTq1_0*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    sum += static_cast<float>(Tq1BlockSum(wb[b], xb[b].qs)) * (Fp16ToFp32(wb[b].d) * xb[b].d);
  }
  return sum;
}

float VecDotTq2_0(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const BlockTq2_0*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    sum += static_cast<float>(Tq2BlockSum(wb[b], xb[b].qs)) * (Fp16ToFp32(wb[b].d) * xb[b].d);
  }
  return sum;
}

}  // namespace octo::cpu
