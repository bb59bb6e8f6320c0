// Portable dot products of the float weight types: F32 x F32, F16 x F16,
// BF16 x BF16. Products and sums in fp32, in 8 interleaved partial sums
// (lane i % 8) added pairwise at the end, close to the AVX2 order.
#include "kernels/cpu/type_kernels.h"
#include "kernels/half.h"

namespace octo::cpu {
namespace {

constexpr int kLanes = 8;

template <typename Load>
float LaneDot(int64_t cols, Load load) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= cols; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      float w, x;
      load(i + l, &w, &x);
      acc[l] += w * x;
    }
  }
  for (int l = 0; i < cols; ++i, ++l) {
    float w, x;
    load(i, &w, &x);
    acc[l] += w * x;
  }
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

}  // namespace

float VecDotF32(const void* w, const void* x, int64_t cols) {
  const auto* wf = static_cast<const float*>(w);
  const auto* xf = static_cast<const float*>(x);
  return LaneDot(cols, [&](int64_t i, float* a, float* b) {
    *a = wf[i];
    *b = xf[i];
  });
}

float VecDotF16(const void* w, const void* x, int64_t cols) {
  const auto* wh = static_cast<const uint16_t*>(w);
  const auto* xh = static_cast<const uint16_t*>(x);
  return LaneDot(cols, [&](int64_t i, float* a, float* b) {
    *a = Fp16ToFp32(wh[i]);
    *b = Fp16ToFp32(xh[i]);
  });
}

float VecDotBf16(const void* w, const void* x, int64_t cols) {
  const auto* wh = static_cast<const uint16_t*>(w);
  const auto* xh = static_cast<const uint16_t*>(x);
  return LaneDot(cols, [&](int64_t i, float* a, float* b) {
    *a = Bf16ToFp32(wh[i]);
    *b = Bf16ToFp32(xh[i]);
  });
}

}  // namespace octo::cpu
