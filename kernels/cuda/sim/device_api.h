// What nvcc gives a .cu file, for the host compiler: the executor's side of
// kernels/cuda (OCTO_CUDA_SIM builds; see kernels/cuda/sim/README.md).
//
// kernels/cuda/common.cuh includes this header when OCTO_CUDA_SIM is defined,
// before any kernel, so the very sources nvcc compiles for the GPU compile
// with g++ and run here: one GPU thread is one fiber, a block's fibers run on
// one host thread (kernels/cuda/sim/block_runner.h), blocks spread over the
// host cores. Nothing in a kernel knows which of the two it runs on.
//
// Supplied here:
//  - qualifiers: __global__ __device__ __host__ __forceinline__ (empty or
//    plain C++, from CUDA's own host headers), __shared__, __launch_bounds__,
//    __noinline__;
//  - built-ins: threadIdx blockIdx blockDim gridDim warpSize;
//  - shared memory: `__shared__ T x[N];` is per block (host-thread-local
//    storage, refilled with poison at every block start when the kernel lives
//    in a shared library, as octo_kernels_cuda does in this build); dynamic
//    shared memory is DynamicSharedMemory() (common.cuh's DynamicShared<T>()
//    is the one spelling both builds share), poisoned at every block start;
//  - barriers and warp operations, checked (a thread that never arrives, two
//    barriers at once, a mask naming an absent lane are errors naming the
//    kernel, block and thread, never a hang);
//  - atomics, fp16/bf16 (the host paths of cuda_fp16.h and cuda_bf16.h) and
//    the intrinsics Octo's kernels use;
//  - async copies to shared memory (cp.async, as cuda_pipeline_primitives.h
//    spells them), queued until their wait;
//  - OCTO_SIM_LAUNCH, what common.cuh's OCTO_LAUNCH becomes here.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <source_location>
#include <tuple>
#include <type_traits>
#include <atomic>

#include <cuda_runtime_api.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "kernels/cuda/sim/thread_context.h"

// CUDA's host headers leave __shared__ empty for a host compiler. Here it is
// host-thread-local storage: a block runs on one host thread from its first
// thread to its last, so for the block's lifetime it is the block's own.
#undef __shared__
#define __shared__ thread_local
#if !defined(__launch_bounds__)
#define __launch_bounds__(...)
#endif
#if !defined(__noinline__)
#define __noinline__ __attribute__((noinline))
#endif

// --- Built-in variables ------------------------------------------------------
#define threadIdx (::octo::cuda_sim::CurrentThread().thread_idx)
#define blockIdx (::octo::cuda_sim::CurrentThread().block->block_idx)
#define blockDim (::octo::cuda_sim::CurrentThread().block->block_dim)
#define gridDim (::octo::cuda_sim::CurrentThread().block->grid_dim)
inline constexpr int warpSize = 32;

// --- Barriers and warp operations -------------------------------------------
// Every one names its call site, so an error says which barrier or shuffle.
inline void __syncthreads(std::source_location site = std::source_location::current()) {
  ::octo::cuda_sim::BlockBarrier(::octo::cuda_sim::BarrierKind::kSync, 0, site);
}
inline int __syncthreads_count(int predicate, std::source_location site = std::source_location::current()) {
  return ::octo::cuda_sim::BlockBarrier(::octo::cuda_sim::BarrierKind::kCount, predicate, site);
}
inline int __syncthreads_and(int predicate, std::source_location site = std::source_location::current()) {
  return ::octo::cuda_sim::BlockBarrier(::octo::cuda_sim::BarrierKind::kAnd, predicate, site);
}
inline int __syncthreads_or(int predicate, std::source_location site = std::source_location::current()) {
  return ::octo::cuda_sim::BlockBarrier(::octo::cuda_sim::BarrierKind::kOr, predicate, site);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, std::source_location site = std::source_location::current()) {
  ::octo::cuda_sim::WarpCollective(::octo::cuda_sim::WarpOp::kSync, mask, 0, 0, warpSize, site);
}

namespace octo::cuda_sim {
// One shuffle of any value of up to 8 bytes, through its bits.
template <typename T>
T Shuffle(WarpOp op, unsigned mask, T var, int param, int width, std::source_location site) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(uint64_t),
                "shuffles move values of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &var, sizeof(T));
  bits = WarpCollective(op, mask, bits, param, width, site);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
}  // namespace octo::cuda_sim

template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
              std::source_location site = std::source_location::current()) {
  return ::octo::cuda_sim::Shuffle(::octo::cuda_sim::WarpOp::kShflIdx, mask, var, src_lane, width, site);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                 std::source_location site = std::source_location::current()) {
  return ::octo::cuda_sim::Shuffle(::octo::cuda_sim::WarpOp::kShflUp, mask, var, static_cast<int>(delta), width, site);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                   std::source_location site = std::source_location::current()) {
  return ::octo::cuda_sim::Shuffle(::octo::cuda_sim::WarpOp::kShflDown, mask, var, static_cast<int>(delta), width,
                                   site);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  std::source_location site = std::source_location::current()) {
  return ::octo::cuda_sim::Shuffle(::octo::cuda_sim::WarpOp::kShflXor, mask, var, lane_mask, width, site);
}
inline unsigned __ballot_sync(unsigned mask, int predicate,
                              std::source_location site = std::source_location::current()) {
  return static_cast<unsigned>(::octo::cuda_sim::WarpCollective(::octo::cuda_sim::WarpOp::kBallot, mask,
                                                                predicate != 0, 0, warpSize, site));
}
inline int __any_sync(unsigned mask, int predicate, std::source_location site = std::source_location::current()) {
  return ::octo::cuda_sim::WarpCollective(::octo::cuda_sim::WarpOp::kBallot, mask, predicate != 0, 0, warpSize,
                                          site) != 0;
}
inline int __all_sync(unsigned mask, int predicate, std::source_location site = std::source_location::current()) {
  const uint64_t votes = ::octo::cuda_sim::WarpCollective(::octo::cuda_sim::WarpOp::kBallot, mask, predicate != 0, 0,
                                                          warpSize, site);
  return votes == mask;
}
// Stops the kernel: an error naming the thread, as a GPU's trap is.
[[noreturn]] inline void __trap(std::source_location site = std::source_location::current()) {
  ::octo::cuda_sim::Trap(site);
}

// --- Memory fences ----------------------------------------------------------
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// --- Atomics (global and shared memory alike) -------------------------------
// Blocks run on several host threads at once, so these are real atomics.
template <typename T>
T atomicAdd(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value);
}
template <typename T>
T atomicSub(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_sub(value);
}
template <typename T>
T atomicExch(T* address, T value) {
  return std::atomic_ref<T>(*address).exchange(value);
}
template <typename T>
T atomicCAS(T* address, T compare, T value) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, value);
  return compare;  // the old value, whether or not it was swapped
}
template <typename T>
T atomicMax(T* address, T value) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load();
  while (old < value && !ref.compare_exchange_weak(old, value)) {
  }
  return old;
}
template <typename T>
T atomicMin(T* address, T value) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load();
  while (value < old && !ref.compare_exchange_weak(old, value)) {
  }
  return old;
}

// --- Intrinsics -------------------------------------------------------------
// Where the GPU's intrinsic is approximate (__expf, __fdividef, rsqrtf) the
// executor computes the exact function; the tests' tolerances cover both.
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline int __popc(unsigned x) { return std::popcount(x); }
inline int __popcll(unsigned long long x) { return std::popcount(x); }
inline int __clz(unsigned x) { return std::countl_zero(x); }
inline int __ffs(unsigned x) { return x == 0 ? 0 : std::countr_zero(x) + 1; }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
template <typename T>
T __ldg(const T* p) {
  return *p;
}
// Four signed (or unsigned) byte products summed into c, as PTX dp4a.
inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i) {
    c += static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * i)) *
         static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * i));
  }
  return c;
}
inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
  for (int i = 0; i < 4; ++i) c += ((a >> (8 * i)) & 0xFFu) * ((b >> (8 * i)) & 0xFFu);
  return c;
}

// --- Async copies (cuda_pipeline_primitives.h) -------------------------------
// Queued per thread until their wait (kernels/cuda/sim/async_copy.h).
inline void __pipeline_memcpy_async(void* dst_shared, const void* src_global, size_t size_and_align,
                                    size_t zfill = 0, std::source_location site = std::source_location::current()) {
  ::octo::cuda_sim::AsyncCopy(dst_shared, src_global, size_and_align, zfill, site);
}
inline void __pipeline_commit() { ::octo::cuda_sim::AsyncCommit(); }
inline void __pipeline_wait_prior(size_t prior) { ::octo::cuda_sim::AsyncWait(prior); }

// --- Launch -----------------------------------------------------------------
namespace octo::cuda_sim {

// A kernel and its arguments, converted to the kernel's parameter types at
// the launch (as nvcc copies them), kept until the last thread has run.
template <typename... P>
struct PackedLaunch {
  void (*kernel)(P...);
  std::tuple<std::decay_t<P>...> args;

  static void Invoke(const void* packed) {
    const auto* self = static_cast<const PackedLaunch*>(packed);
    std::apply(self->kernel, self->args);
  }
};

// kernel<<<grid, block, shared_bytes, stream>>>(args...) for the executor:
// queued on `stream`; a bad configuration is cudaGetLastError()'s, as on a GPU.
template <typename... P, typename... A>
void Launch(const char* name, void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes,
            cudaStream_t stream, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
  auto packed = std::make_shared<PackedLaunch<P...>>(
      PackedLaunch<P...>{kernel, std::tuple<std::decay_t<P>...>(std::forward<A>(args)...)});
  LaunchKernel(KernelLaunch{name, reinterpret_cast<const void*>(kernel), grid, block, shared_bytes, stream,
                            &PackedLaunch<P...>::Invoke, std::move(packed)});
}

}  // namespace octo::cuda_sim

#define OCTO_SIM_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
  ::octo::cuda_sim::Launch(#kernel, kernel, grid, block, shared_bytes, stream __VA_OPT__(, ) __VA_ARGS__)
