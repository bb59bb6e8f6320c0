// SiLU-gated product on CUDA. Semantics and preconditions: kernels/ops.h;
// the CPU twin is kernels/cpu/silu_mul.cc.
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/act_q8.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/fused.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/gates.cuh"
#include "kernels/op_checks.h"
#include "kernels/ops.h"

namespace octo::cuda {
namespace {

// --- Kernels -----------------------------------------------------------------

// out[i] = SiluTimes(gate[i], up[i]). Each element is read and written by one
// thread, the reads first, so out may be gate or up.
// Launch: one-dimensional, any size (grid-stride).
__global__ void SiluMulKernel(const float* gate,  // (n)
                              const float* up,    // (n)
                              float* out,         // (n)
                              int64_t n) {
  GridStart();
  for (int64_t i = GridStrideBegin(); i < n; i += GridStrideStep()) out[i] = SiluTimes(gate[i], up[i]);
}

// The same, a warp per rounding chunk, also rounding out into q8
// (act_q8.cuh). A chunk's elements are read and written by its own warp.
// Launch: kRoundWarps warps per block, one per chunk (n / chunk in all).
constexpr int kRoundWarps = 8;
template <ActQ8Rule R>
__global__ void SiluMulRoundedKernel(const float* gate, const float* up, float* out, int64_t n_chunks, ActQ8Out q8) {
  GridStart();
  const int64_t chunk = static_cast<int64_t>(blockIdx.x) * kRoundWarps + threadIdx.x / kWarpSize;
  if (chunk >= n_chunks) return;  // the whole warp
  RoundChunk<R>(chunk, threadIdx.x % kWarpSize, [=](int64_t e) { return SiluTimes(gate[e], up[e]); }, out, q8.q,
                q8.d);
}

}  // namespace

// --- Launchers ---------------------------------------------------------------

absl::Status SiluMul(const float* gate, const float* up, float* out, int64_t n, StreamHandle stream) {
  absl::Status args = CheckSiluMulArgs(gate, up, out, n);
  if (!args.ok()) return args;
  OCTO_LAUNCH(SiluMulKernel, ElementwiseBlocks(n), kElementwiseThreads, 0, stream, gate, up, out, n);
  return absl::OkStatus();
}

absl::Status SiluMul(const float* gate, const float* up, float* out, int64_t n, StreamHandle stream,
                     const ActQ8Out& q8) {
  absl::Status args = CheckSiluMulArgs(gate, up, out, n);
  if (!args.ok()) return args;
  if (absl::Status rounding = CheckRounding("SiluMul", n, q8); !rounding.ok()) return rounding;
  return WithActQ8Rule(q8.rule, [&](auto rule) {
    const int64_t n_chunks = n / kRoundChunk<decltype(rule)::value>;
    const unsigned grid = static_cast<unsigned>((n_chunks + kRoundWarps - 1) / kRoundWarps);
    OCTO_LAUNCH(SiluMulRoundedKernel<decltype(rule)::value>, grid, kRoundWarps * kWarpSize, 0, stream, gate, up,
                out, n_chunks, q8);
    return absl::OkStatus();
  });
}

}  // namespace octo::cuda
