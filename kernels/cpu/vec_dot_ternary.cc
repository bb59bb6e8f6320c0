// Dot products of the ternary types (TQ1_0, TQ2_0) with Q8_K activations,
// as llama.cpp's CPU backend takes them: per 256-element block the trits
// times the 8-bit activations summed exactly in integers, then
// (float) sum * (d_w * d_x), blocks added in order. The SIMD builds' dots
// (vec_dot_ternary_avx2.cc) sum in ggml's AVX2 order instead.
#include "kernels/cpu/type_kernels.h"

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

}  // namespace

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
