// What every CUDA file in kernels/cuda/ shares: the check macro that turns a
// cudaError_t into an absl::Status, the launch macro, block reductions,
// fp16/bf16 conversions.
//
// The first part (status) is host code and may be included from .cc files
// built by the host compiler (device.cc is); the device helpers below it are
// compiled by nvcc, or by the host compiler for the executor
// (OCTO_CUDA_SIM: kernels/cuda/sim/device_api.h supplies what nvcc would).
#pragma once

#if defined(OCTO_CUDA_SIM)
#include "kernels/cuda/sim/device_api.h"
#endif

#include <type_traits>

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/api_counts.h"
#include "kernels/cuda/device.h"
#include "kernels/ops.h"

static_assert(std::is_same_v<octo::cuda::StreamHandle, cudaStream_t>,
              "kernels/ops.h declares StreamHandle as cudaStream_t's type");

namespace octo::cuda {

// The absl code for a CUDA runtime error, picked for what a caller can do:
//   out of device memory                  -> RESOURCE_EXHAUSTED
//   no device, no driver or driver too old -> FAILED_PRECONDITION
//   anything else (a bug, a device fault)  -> INTERNAL
inline absl::StatusCode CudaErrorCode(cudaError_t error) {
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

// A Status for `error`, returned by the expression `expr` at file:line.
inline absl::Status CudaErrorToStatus(cudaError_t error, const char* expr, const char* file,
                                      int line) {
  return absl::Status(CudaErrorCode(error),
                      absl::StrFormat("%s:%d: %s failed: %s (%s)", file, line, expr,
                                      cudaGetErrorName(error), cudaGetErrorString(error)));
}

}  // namespace octo::cuda

// Evaluates `expr` (a cudaError_t) once; if it is not cudaSuccess, returns its
// Status (with the expression and file:line) from the enclosing function.
#define OCTO_CUDA_RETURN_IF_ERROR(expr)                                                  \
  do {                                                                                   \
    const cudaError_t octo_cuda_error_ = (expr);                                         \
    if (octo_cuda_error_ != cudaSuccess) {                                               \
      return ::octo::cuda::CudaErrorToStatus(octo_cuda_error_, #expr, __FILE__, __LINE__); \
    }                                                                                    \
  } while (false)

#if defined(__CUDACC__) || defined(OCTO_CUDA_SIM)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#if !defined(OCTO_CUDA_SIM)
#include <cuda_pipeline_primitives.h>  // async copies; the executor's are in device_api.h
#endif

// The one way kernels are launched: kernel<<<grid, block, shared_bytes,
// stream>>>(args...) under nvcc, as a programmatic dependent launch where
// the device has them (ProgrammaticLaunches, device.h); queued on the
// executor's stream in an OCTO_CUDA_SIM build. Each launch is counted
// (api_counts.h). A launch is not followed by cudaGetLastError() (a host
// call each): a bad configuration surfaces once per pass, when
// CudaBackend::Download reads the pass's result (and a kernel's own fault is
// sticky anyway). Every kernel so launched begins with GridStart().
#if defined(OCTO_CUDA_SIM)
#define OCTO_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
  (::octo::cuda::CountLaunch(), OCTO_SIM_LAUNCH(kernel, grid, block, shared_bytes, stream __VA_OPT__(, ) __VA_ARGS__))
#else
#define OCTO_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
  (::octo::cuda::CountLaunch(),                                     \
   ::octo::cuda::LaunchAfterPredecessor(kernel, grid, block, shared_bytes, stream __VA_OPT__(, ) __VA_ARGS__))
#endif

namespace octo::cuda {

#if !defined(OCTO_CUDA_SIM)
// kernel<<<grid, block, shared_bytes, stream>>>(args...) as a programmatic
// dependent launch: the kernel may be scheduled while its stream's previous
// kernel still runs (blocks fill the SMs that kernel leaves free, and the
// launch's latency hides behind its tail); each of its threads then waits
// in GridStart() until that kernel has completed and its writes are
// visible. Its error is also cudaGetLastError()'s, as a <<<>>> launch's.
template <typename... P, typename... A>
cudaError_t LaunchProgrammatic(void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                               A&&... args) {
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, std::forward<A>(args)...);
}

// OCTO_LAUNCH's launch under nvcc: programmatic where ProgrammaticLaunches
// says so, else ordinary.
template <typename... P, typename... A>
void LaunchAfterPredecessor(void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                            A&&... args) {
  if (ProgrammaticLaunches()) {
    (void)LaunchProgrammatic(kernel, grid, block, shared_bytes, stream, std::forward<A>(args)...);
  } else {
    kernel<<<grid, block, shared_bytes, stream>>>(std::forward<A>(args)...);
  }
}
#endif

// The first statement of every kernel OCTO_LAUNCH launches, before it reads
// or writes any global memory: waits until the kernel before it on its
// stream has completed and its writes are visible (a no-op unless this
// launch was programmatic), then lets the kernel after it be scheduled.
// Nothing a kernel does before it is ordered after its predecessor, so
// nothing may come before it. The executor fails a kernel thread that reads
// threadIdx, blockIdx, blockDim or gridDim before it, or ends without it.
__device__ __forceinline__ void GridStart() {
#if defined(OCTO_CUDA_SIM)
  ::octo::cuda_sim::GridStart();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

// Asks L2 for [p, p + bytes) of device memory (its whole 16-byte units, as
// one bulk prefetch: sm_90 and newer; a no-op before them, where kernels
// do not start before their predecessor ends). A hint: no result changes
// with it, and L2 is where every SM's loads and every copy meet, so a line
// it fetches is never staler than a load's. The executor fails a range
// outside one device allocation.
#if defined(OCTO_CUDA_SIM)
inline void PrefetchL2(const void* p, int64_t bytes, std::source_location site = std::source_location::current()) {
  ::octo::cuda_sim::PrefetchL2(p, static_cast<size_t>(bytes), site);
}
#else
__device__ __forceinline__ void PrefetchL2(const void* p, int64_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const size_t begin = (__cvta_generic_to_global(p) + 15) & ~size_t{15};
  const size_t end = (__cvta_generic_to_global(p) + static_cast<size_t>(bytes)) & ~size_t{15};
  if (end > begin) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(begin), "r"(static_cast<unsigned>(end - begin)));
  }
#endif
}
#endif

// GridStart(), with `prefetch()` run first: the one thing a kernel may do
// before its predecessor is done is ask L2 for what that kernel cannot be
// writing (its weights), so the loads after the wait find them there. The
// callable reads the kernel's index and parameters, computes and calls
// PrefetchL2; it never loads, stores, syncs, shuffles or returns from the
// kernel. grid_start.sh reads that from the PTX; the executor fails a
// barrier, warp operation or async copy made in it.
template <typename Prefetch>
__device__ __forceinline__ void GridStartAfter(Prefetch&& prefetch) {
#if defined(OCTO_CUDA_SIM)
  ::octo::cuda_sim::BeginPrefetch();
#endif
  prefetch();
  GridStart();
}

inline constexpr int kWarpSize = 32;
inline constexpr int kMaxBlockSize = 1024;  // threads per block on every arch we build

// The block's dynamic shared memory (the launch's shared_bytes), 16-byte
// aligned, as T. The one spelling of `extern __shared__` in Octo's kernels.
template <typename T>
__device__ __forceinline__ T* DynamicShared() {
#if defined(OCTO_CUDA_SIM)
  return reinterpret_cast<T*>(::octo::cuda_sim::DynamicSharedMemory());
#else
  extern __shared__ __align__(16) unsigned char octo_dynamic_shared[];
  return reinterpret_cast<T*>(octo_dynamic_shared);
#endif
}

// --- Reductions --------------------------------------------------------------

// Sum of `v` over the 32 lanes of a warp, returned to every lane. All 32
// lanes must call it. T is float or double.
template <typename T>
__device__ __forceinline__ T WarpReduceSum(T v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// Sum of `v` over a one-dimensional block, returned to every thread.
// Requirements: blockDim.x is a multiple of 32 and at most 1024, and every
// thread of the block calls it (it holds __syncthreads). Safe to call more
// than once in a kernel: it waits before reusing its shared memory.
__device__ __forceinline__ float BlockReduceSum(float v) {
  __shared__ float warp_sums[kMaxBlockSize / kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int n_warps = blockDim.x / kWarpSize;

  v = WarpReduceSum(v);
  __syncthreads();  // a previous call may still be reading warp_sums
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();  // every warp's sum is written
  v = lane < n_warps ? warp_sums[lane] : 0.0f;
  return WarpReduceSum(v);
}

// --- Half precision ----------------------------------------------------------
// Kernels load fp16/bf16, compute in float and store back with these.

__host__ __device__ __forceinline__ float ToFloat(float v) { return v; }
__host__ __device__ __forceinline__ float ToFloat(__half v) { return __half2float(v); }
__host__ __device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

// Round-to-nearest-even conversion from float to T (float, __half or
// __nv_bfloat16).
template <typename T>
__host__ __device__ __forceinline__ T FromFloat(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "FromFloat: float, __half or __nv_bfloat16");
    return __float2bfloat16_rn(v);
  }
}

}  // namespace octo::cuda

#endif  // defined(__CUDACC__) || defined(OCTO_CUDA_SIM)
