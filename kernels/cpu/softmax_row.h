// The one-row softmax shared by cpu::Softmax, cpu::Attention and
// cpu::TopKExperts, so all three round exactly alike. Internal to
// kernels/cpu.
#pragma once

#include <cstdint>

namespace octo::cpu {

// In place over x (n), n > 0, as ggml's soft_max does it on the CPU:
//   max = the largest x[i]
//   e_i = expf(x[i] - max)            (float)
//   sum = sum_i e_i                   (accumulated in double, index order)
//   x[i] = e_i * (float)(1.0 / sum)   (multiply by the reciprocal, not divide)
// A row holding +inf or NaN, or only -inf, comes out NaN.
void SoftmaxRow(float* x, int64_t n);

}  // namespace octo::cpu
