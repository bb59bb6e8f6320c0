// What vector instructions this CPU has, asked once at run time (cpuid), so
// one binary runs everywhere and uses AVX2 where it can.
#pragma once

#include "kernels/ops.h"

namespace octo::cpu {

// kAvx2 when the CPU (and OS) support AVX2, FMA and F16C; kPortable otherwise.
Simd DetectSimd();

const char* SimdName(Simd simd);  // "avx2", "portable"

}  // namespace octo::cpu
