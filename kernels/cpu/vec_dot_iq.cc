// The IQ1-IQ3 types on the CPU (kernels/iq_blocks.h has the encodings):
// dequantizers giving ggml's floats, and dot products with Q8_K activations
// as ggml's CPU backend takes them: per block, sum over the groups of the
// integer scale times sum(L * q8), exactly in integers; then
// (d_w * d_x) * that, times the type's factor per block (IQ1) or once at
// the end (the others). The SIMD builds sum in ggml's AVX2 order:
// vec_dot_iq_avx2.cc and vec_dot_iq1_avx2.cc.
#include <cstdint>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/type_kernels.h"
#include "kernels/half.h"
#include "kernels/iq_blocks.h"

namespace octo::cpu {
namespace {

using namespace iq;

template <typename T>
void DequantizeIq(const void* w, int64_t cols, float* out) {
  const auto* blocks = static_cast<const typename T::Block*>(w);
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const typename T::Block& block = blocks[b];
    const float d = Fp16ToFp32(T::DBits(block));
    for (int g = 0; g < kQKK / 8; ++g, out += 8) {
      int L[8];
      T::Levels(block, g, L);
      const float dl = (d * static_cast<float>(T::Scale(block, g))) * T::kFactor;
      for (int j = 0; j < 8; ++j) out[j] = dl * static_cast<float>(L[j]);
    }
  }
}

template <typename T>
int32_t BlockSum(const typename T::Block& block, const int8_t* q8) {
  int32_t sum = 0;
  for (int g = 0; g < kQKK / 8; ++g) {
    int L[8];
    T::Levels(block, g, L);
    int32_t part = 0;
    for (int j = 0; j < 8; ++j) part += L[j] * q8[8 * g + j];
    sum += T::Scale(block, g) * part;
  }
  return sum;
}

template <typename T>
float VecDotIq(const void* w, const void* x, int64_t cols) {
  const auto* wb = static_cast<const typename T::Block*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const float d = Fp16ToFp32(T::DBits(wb[b])) * xb[b].d;
    const float block = static_cast<float>(BlockSum<T>(wb[b], xb[b].qs));
    sum += T::kFactorPerBlock ? d * (block * T::kFactor) : d * block;
  }
  return T::kFactorPerBlock ? sum : T::kFactor * sum;
}

}  // namespace

void DequantizeRowIq2Xxs(const void* w, int64_t cols, float* out) { DequantizeIq<Iq2XxsTraits>(w, cols, out); }
void DequantizeRowIq2Xs(const void* w, int64_t cols, float* out) { DequantizeIq<Iq2XsTraits>(w, cols, out); }
void DequantizeRowIq2S(const void* w, int64_t cols, float* out) { DequantizeIq<Iq2STraits>(w, cols, out); }
void DequantizeRowIq3Xxs(const void* w, int64_t cols, float* out) { DequantizeIq<Iq3XxsTraits>(w, cols, out); }
void DequantizeRowIq3S(const void* w, int64_t cols, float* out) { DequantizeIq<Iq3STraits>(w, cols, out); }
void DequantizeRowIq1S(const void* w, int64_t cols, float* out) { DequantizeIq<Iq1STraits>(w, cols, out); }
void DequantizeRowIq1M(const void* w, int64_t cols, float* out) { DequantizeIq<Iq1MTraits>(w, cols, out); }

float VecDotIq2Xxs(const void* w, const void* x, int64_t cols) { return VecDotIq<Iq2XxsTraits>(w, x, cols); }
float VecDotIq2Xs(const void* w, const void* x, int64_t cols) { return VecDotIq<Iq2XsTraits>(w, x, cols); }
float VecDotIq2S(const void* w, const void* x, int64_t cols) { return VecDotIq<Iq2STraits>(w, x, cols); }
float VecDotIq3Xxs(const void* w, const void* x, int64_t cols) { return VecDotIq<Iq3XxsTraits>(w, x, cols); }
float VecDotIq3S(const void* w, const void* x, int64_t cols) { return VecDotIq<Iq3STraits>(w, x, cols); }
float VecDotIq1S(const void* w, const void* x, int64_t cols) { return VecDotIq<Iq1STraits>(w, x, cols); }
float VecDotIq1M(const void* w, const void* x, int64_t cols) { return VecDotIq<Iq1MTraits>(w, x, cols); }

}  // namespace octo::cpu
