// The executor tests' kernels (test_kernels.h). One source, as every kernel
// in Octo: these would run on a GPU as they are.
#include "tests/kernels/cuda/sim/test_kernels.h"

#include "kernels/cuda/common.cuh"

namespace octo::sim_test {
namespace {

using cuda::DynamicShared;
using cuda::GridStart;
using cuda::GridStartAfter;
using cuda::PrefetchL2;

__global__ void BlockSumKernel(const float* x, float* out, int n, bool skip_sync) {
  GridStart();
  float* partial = DynamicShared<float>();  // (n)
  const int t = threadIdx.x;
  partial[t] = x[t];
  // Tree: at each step the lower half adds the upper half's partials.
  for (int half = 512; half > 0; half /= 2) {
    if (!skip_sync) __syncthreads();  // the partials of the last step are written
    if (t < half && t + half < n) partial[t] += partial[t + half];
  }
  __syncthreads();
  if (t == 0) out[0] = partial[0];
}

__global__ void DivergentBarrierKernel(int split) {
  GridStart();
  if (static_cast<int>(threadIdx.x) < split) {
    __syncthreads();
  } else {
    __syncthreads();
  }
}

__global__ void EarlyExitKernel(int live) {
  GridStart();
  if (static_cast<int>(threadIdx.x) >= live) return;
  __syncthreads();
}

// Both touch memory before anything orders them after the kernel before
// them: a race on a GPU under programmatic launches.
__global__ void LateGridStartKernel(int* out) {
  const int i = threadIdx.x;
  GridStart();
  out[i] = i;
}
__global__ void NoGridStartKernel(int* out) { out[0] = 0; }

__global__ void PrefetchSlicesKernel(const float* x, int n, int* out, PrefetchCase c) {
  auto prefetch = [&] {
    const int slice = n / 32, t = threadIdx.x;
    PrefetchL2(x + t * slice, (slice + (c == PrefetchCase::kPastEnd && t == 31 ? 1 : 0)) * sizeof(float));
  };
  GridStartAfter([&] {
    if (c == PrefetchCase::kSyncFirst) __syncthreads();
    if (c != PrefetchCase::kAfterStart) prefetch();
  });
  if (c == PrefetchCase::kAfterStart) prefetch();
  out[threadIdx.x] = threadIdx.x;
}

__global__ void FullMaskWarpSumKernel(const float* x, float* out) {
  GridStart();
  float v = x[threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (threadIdx.x == 0) out[0] = v;
}

__global__ void ShuffleOutsideMaskKernel(float* out) {
  GridStart();
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_sync(0x0000ffffu, static_cast<float>(threadIdx.x), static_cast<int>(threadIdx.x) + 16);
}

__global__ void CopyShiftedKernel(const float* x, float* out, int n, int offset) {
  GridStart();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i + offset];
}

__global__ void ReadStaticSharedFirstKernel(float* out) {
  GridStart();
  __shared__ float slot;
  if (threadIdx.x == 0) {
    out[blockIdx.x] = slot;  // before any write in this block
    slot = static_cast<float>(blockIdx.x);
  }
}

__global__ void StartOrderKernel(unsigned* counter, unsigned* order) {
  GridStart();
  if (threadIdx.x == 0) order[blockIdx.y * gridDim.x + blockIdx.x] = atomicAdd(counter, 1u);
}

// out: [0] ballot of odd lanes, [1] any(lane == 5), [2] all(lane < 64),
// [3] __syncthreads_count(x odd), [4] __syncthreads_and(x > 0),
// [5] __syncthreads_or(x == 7), then per thread t: [8 + t] = x of lane
// (lane + 1) % 32 in its warp (a rotation by __shfl_sync), [8 + threads + t]
// = prefix sum of x over the lanes up to t (__shfl_up_sync), [8 + 2 * threads
// + t] = x of lane ^ 1 (__shfl_xor_sync, width 2).
__global__ void WarpAndBarrierOpsKernel(const int* x, int* out, int threads) {
  GridStart();
  const int t = threadIdx.x;
  const int lane = t % 32;
  const int v = x[t];
  const unsigned ballot = __ballot_sync(0xffffffffu, lane % 2);
  const int any = __any_sync(0xffffffffu, lane == 5);
  const int all = __all_sync(0xffffffffu, lane < 64);
  const int count = __syncthreads_count(v % 2);
  const int all_positive = __syncthreads_and(v > 0);
  const int some_seven = __syncthreads_or(v == 7);
  if (t == 0) {
    out[0] = static_cast<int>(ballot);
    out[1] = any;
    out[2] = all;
    out[3] = count;
    out[4] = all_positive;
    out[5] = some_seven;
  }
  out[8 + t] = __shfl_sync(0xffffffffu, v, lane + 1);
  int prefix = v;
  for (int d = 1; d < 32; d *= 2) {
    const int up = __shfl_up_sync(0xffffffffu, prefix, d);
    if (lane >= d) prefix += up;
  }
  out[8 + threads + t] = prefix;
  out[8 + 2 * threads + t] = __shfl_xor_sync(0xffffffffu, v, 1, 2);
  __syncwarp();
}

__global__ void WaitForFlagKernel(const int* flag, int* out, long long max_spins) {
  GridStart();
  for (long long i = 0; i < max_spins; ++i) {
    if (*static_cast<const volatile int*>(flag) != 0) {
      out[0] = 1;
      return;
    }
  }
  out[0] = 0;
}

__global__ void SetFlagKernel(int* flag) {
  GridStart();
  atomicExch(flag, 1);
}

__global__ void AsyncStageKernel(const float* x, float* out, AsyncWait wait) {
  GridStart();
  __shared__ __align__(16) float staged[256];
  const int lane = threadIdx.x;
  for (int group = 0; group < 2; ++group) {
    const int at = 128 * group + 4 * lane;
    __pipeline_memcpy_async(staged + at, x + at, 16);
    __pipeline_commit();
  }
  if (wait == AsyncWait::kAllButNewest) __pipeline_wait_prior(1);
  if (wait == AsyncWait::kAll) __pipeline_wait_prior(0);
  __syncwarp();
  for (int i = lane; i < 256; i += 32) out[i] = staged[i];
  __syncwarp();  // every lane has read before one ends (an ending thread's copies land)
}

}  // namespace

cudaError_t BlockSum(const float* x, float* out, int n, bool skip_sync, cudaStream_t stream) {
  OCTO_LAUNCH(BlockSumKernel, 1, n, n * sizeof(float), stream, x, out, n, skip_sync);
  return cudaGetLastError();
}

cudaError_t DivergentBarrier(int threads, int split, cudaStream_t stream) {
  OCTO_LAUNCH(DivergentBarrierKernel, 1, threads, 0, stream, split);
  return cudaGetLastError();
}

cudaError_t EarlyExitBeforeBarrier(int threads, int live, cudaStream_t stream) {
  OCTO_LAUNCH(EarlyExitKernel, 1, threads, 0, stream, live);
  return cudaGetLastError();
}

cudaError_t WithoutGridStartFirst(int* out, int threads, GridStartMistake mistake, cudaStream_t stream) {
  if (mistake == GridStartMistake::kLate) {
    OCTO_LAUNCH(LateGridStartKernel, 1, threads, 0, stream, out);
  } else {
    OCTO_LAUNCH(NoGridStartKernel, 1, threads, 0, stream, out);
  }
  return cudaGetLastError();
}

cudaError_t PrefetchSlices(const float* x, int n, int* out, PrefetchCase c, cudaStream_t stream) {
  OCTO_LAUNCH(PrefetchSlicesKernel, 1, 32, 0, stream, x, n, out, c);
  return cudaGetLastError();
}

cudaError_t FullMaskWarpSum(const float* x, float* out, int threads, cudaStream_t stream) {
  OCTO_LAUNCH(FullMaskWarpSumKernel, 1, threads, 0, stream, x, out);
  return cudaGetLastError();
}

cudaError_t ShuffleOutsideMask(float* out, cudaStream_t stream) {
  OCTO_LAUNCH(ShuffleOutsideMaskKernel, 1, 32, 0, stream, out);
  return cudaGetLastError();
}

cudaError_t CopyShifted(const float* x, float* out, int n, int offset, cudaStream_t stream) {
  OCTO_LAUNCH(CopyShiftedKernel, (n + 127) / 128, 128, 0, stream, x, out, n, offset);
  return cudaGetLastError();
}

cudaError_t ReadStaticSharedFirst(float* out, int blocks, cudaStream_t stream) {
  OCTO_LAUNCH(ReadStaticSharedFirstKernel, blocks, 32, 0, stream, out);
  return cudaGetLastError();
}

cudaError_t StartOrder(unsigned* counter, unsigned* order, dim3 grid, cudaStream_t stream) {
  OCTO_LAUNCH(StartOrderKernel, grid, 32, 0, stream, counter, order);
  return cudaGetLastError();
}

cudaError_t WarpAndBarrierOps(const int* x, int* out, int threads, cudaStream_t stream) {
  OCTO_LAUNCH(WarpAndBarrierOpsKernel, 1, threads, 0, stream, x, out, threads);
  return cudaGetLastError();
}

cudaError_t WaitForFlag(const int* flag, int* out, long long max_spins, cudaStream_t stream) {
  OCTO_LAUNCH(WaitForFlagKernel, 1, 1, 0, stream, flag, out, max_spins);
  return cudaGetLastError();
}

cudaError_t AsyncStage(const float* x, float* out, int src_offset, AsyncWait wait, cudaStream_t stream) {
  OCTO_LAUNCH(AsyncStageKernel, 1, 32, 0, stream, x + src_offset, out, wait);
  return cudaGetLastError();
}

cudaError_t SetFlag(int* flag, cudaStream_t stream) {
  OCTO_LAUNCH(SetFlagKernel, 1, 1, 0, stream, flag);
  return cudaGetLastError();
}

}  // namespace octo::sim_test
