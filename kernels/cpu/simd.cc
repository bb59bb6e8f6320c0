#include "kernels/cpu/simd.h"

namespace octo::cpu {

Simd DetectSimd() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    return Simd::kAvx2;
  }
#endif
  return Simd::kPortable;
}

const char* SimdName(Simd simd) { return simd == Simd::kAvx2 ? "avx2" : "portable"; }

}  // namespace octo::cpu
