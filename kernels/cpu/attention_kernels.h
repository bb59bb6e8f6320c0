// The two inner loops of cpu::Attention, one set per instruction set. Internal
// to kernels/cpu: attention.cc picks a set from exec.simd.
//
// Both sets sum in float. They differ only in summation order (the dot) and
// in fusing the multiply-add (the accumulation), so their results agree to the
// last bits; attention_test.cc checks how closely.
#pragma once

#include <cstdint>

namespace octo::cpu {

struct AttentionKernels {
  // sum_d q[d] * fp16(k[d]) over d < n. q holds fp16 values widened to
  // float, so every product is exact in float; only the sum rounds.
  float (*dot)(const float* q, const uint16_t* k, int n);
  // acc[d] += a * fp16(v[d]) for d < n.
  void (*accumulate)(float a, const uint16_t* v, float* acc, int n);
};

// Index order, one float accumulator. Baseline x86-64.
AttentionKernels PortableAttentionKernels();

#if defined(__x86_64__)
// 8-wide AVX2 with F16C conversions and FMA (kernels/cpu/attention_avx2.cc):
// call only when the CPU has them (DetectSimd() == Simd::kAvx2).
AttentionKernels Avx2AttentionKernels();
#endif

}  // namespace octo::cpu
