// The CUDA runtime API calls Octo makes, implemented by the executor with
// the signatures of CUDA's cuda_runtime_api.h (included, so the compiler
// holds every definition to its declaration). Semantics follow the CUDA
// documentation; where the executor is stricter (pointer kinds, a copy that
// must not be raced), the difference shows up as an error or a fault, never
// as a silently different result.
#include <chrono>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/strings/str_format.h"
#include "kernels/cuda/sim/executor.h"
#include "kernels/cuda/sim/thread_context.h"

namespace octo::cuda_sim {
namespace {

thread_local cudaError_t last_error = cudaSuccess;

// Records a failure as the thread's last error, as the runtime does.
cudaError_t Result(cudaError_t error) {
  if (error != cudaSuccess) last_error = error;
  return error;
}

Executor& Ex() { return Executor::Get(); }

const char* KindName(cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToHost: return "host to host";
    case cudaMemcpyHostToDevice: return "host to device";
    case cudaMemcpyDeviceToHost: return "device to host";
    case cudaMemcpyDeviceToDevice: return "device to device";
    default: return "default";
  }
}

// Queues a copy of `count` bytes on `stream`; an asynchronous one stays in
// flight for the configured copy delay first. A synchronous one (and one into
// pageable memory) is waited for.
cudaError_t Copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream,
                 bool asynchronous) {
  Executor& ex = Ex();
  if (count == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr || !ex.IsStream(stream)) return Result(cudaErrorInvalidValue);
  DeviceMemory& memory = ex.memory();
  const bool dst_device = memory.IsDevicePointer(dst), src_device = memory.IsDevicePointer(src);
  if (kind == cudaMemcpyDefault) {
    kind = dst_device ? (src_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                      : (src_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  }
  // Each side must be what the kind says: a device pointer passed as host
  // memory (or the reverse) is a bug a GPU may not catch; the executor does.
  const bool want_dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool want_src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDeviceToDevice) return Result(cudaErrorInvalidMemcpyDirection);
  if (want_dst_device != dst_device || want_src_device != src_device) return Result(cudaErrorInvalidValue);
  if ((dst_device && !memory.IsDeviceRange(dst, count)) || (src_device && !memory.IsDeviceRange(src, count))) {
    return Result(cudaErrorInvalidValue);
  }
  if ((kind == cudaMemcpyHostToDevice && memory.RunsPastPinned(src, count)) ||
      (kind == cudaMemcpyDeviceToHost && memory.RunsPastPinned(dst, count))) {
    return Result(cudaErrorInvalidValue);
  }
  if (ex.sticky_error() != cudaSuccess) return Result(ex.sticky_error());

  // Pageable host memory: a copy from it reads the source now; one into it
  // is complete when the call returns. Pinned memory is truly asynchronous.
  // A capture holds only what runs later as it was called: asynchronous
  // copies between device and pinned memory.
  if (ex.Capturing(stream) &&
      (!asynchronous || kind == cudaMemcpyHostToHost || (kind == cudaMemcpyHostToDevice && !memory.IsPinned(src, count)) ||
       (kind == cudaMemcpyDeviceToHost && !memory.IsPinned(dst, count)))) {
    ex.InvalidateCapture(stream);
    return Result(cudaErrorStreamCaptureUnsupported);
  }
  std::shared_ptr<std::vector<unsigned char>> staging;
  const void* from = src;
  if (asynchronous && kind == cudaMemcpyHostToDevice && !memory.IsPinned(src, count)) {
    const auto* bytes = static_cast<const unsigned char*>(src);
    staging = std::make_shared<std::vector<unsigned char>>(bytes, bytes + count);
    from = staging->data();
  }
  const bool wait = !asynchronous || (kind == cudaMemcpyDeviceToHost && !memory.IsPinned(dst, count)) ||
                    kind == cudaMemcpyHostToHost;
  const std::chrono::microseconds delay = asynchronous ? ex.config().copy_delay : std::chrono::microseconds(0);
  std::string what = absl::StrFormat("%s (%s, %d bytes) on %s", asynchronous ? "cudaMemcpyAsync" : "cudaMemcpy",
                                     KindName(kind), count, ex.Resolve(stream)->name());
  const uint64_t ticket = ex.Enqueue(stream, what, [&memory, dst, src, from, count, delay, what, staging,
                                                    src_device] {
    if (delay.count() > 0) {
      const int flight = memory.TakeOff(dst, src_device ? src : nullptr, count, what);
      std::this_thread::sleep_for(delay);
      memory.Land(flight);
    }
    std::memcpy(dst, from, count);
  });
  if (wait) {
    ex.Resolve(stream)->WaitDone(ticket);
    return Result(ex.sticky_error());
  }
  return cudaSuccess;
}

cudaError_t Set(void* dst, int value, size_t count, cudaStream_t stream, bool asynchronous) {
  Executor& ex = Ex();
  if (count == 0) return cudaSuccess;
  if (!ex.IsStream(stream) || !ex.memory().IsDeviceRange(dst, count)) return Result(cudaErrorInvalidValue);
  if (ex.sticky_error() != cudaSuccess) return Result(ex.sticky_error());
  if (!asynchronous && ex.Capturing(stream)) {
    ex.InvalidateCapture(stream);
    return Result(cudaErrorStreamCaptureUnsupported);
  }
  const std::chrono::microseconds delay = asynchronous ? ex.config().copy_delay : std::chrono::microseconds(0);
  std::string what = absl::StrFormat("%s (%d bytes) on %s", asynchronous ? "cudaMemsetAsync" : "cudaMemset", count,
                                     ex.Resolve(stream)->name());
  DeviceMemory& memory = ex.memory();
  const uint64_t ticket = ex.Enqueue(stream, what, [&memory, dst, value, count, delay, what] {
    if (delay.count() > 0) {
      const int flight = memory.TakeOff(dst, nullptr, count, what);
      std::this_thread::sleep_for(delay);
      memory.Land(flight);
    }
    std::memset(dst, value, count);
  });
  if (!asynchronous) {
    ex.Resolve(stream)->WaitDone(ticket);
    return Result(ex.sticky_error());
  }
  return cudaSuccess;
}

// Destroyed events are kept (reachable, never reused): a stream operation
// queued before the destroy may still look at one.
std::mutex retired_mu;
std::vector<std::unique_ptr<CUevent_st>>* const retired_events = new std::vector<std::unique_ptr<CUevent_st>>();

constexpr size_t kMaxSharedBytesPerBlock = 227 * 1024;  // sm_90's opt-in limit

}  // namespace

void LaunchKernel(KernelLaunch launch) {
  Executor& ex = Ex();
  const dim3& g = launch.grid;
  const dim3& b = launch.block;
  const uint64_t threads = static_cast<uint64_t>(b.x) * b.y * b.z;
  if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535 || threads == 0 ||
      threads > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64 || launch.shared_bytes > kMaxSharedBytesPerBlock) {
    Result(cudaErrorInvalidConfiguration);
    return;
  }
  if (!ex.IsStream(launch.stream)) {
    Result(cudaErrorInvalidResourceHandle);
    return;
  }
  if (ex.sticky_error() != cudaSuccess) {
    Result(ex.sticky_error());
    return;
  }
  const cudaStream_t stream = launch.stream;
  std::string what = absl::StrFormat("kernel %s", launch.name);
  ex.Enqueue(stream, std::move(what), [&ex, launch = std::move(launch)] {
    const std::string error = ex.grids().Run(launch);
    if (!error.empty()) ex.Fail(cudaErrorLaunchFailure, error);
  });
}

}  // namespace octo::cuda_sim

using octo::cuda_sim::Ex;
using octo::cuda_sim::Result;

extern "C" {

cudaError_t cudaMalloc(void** devPtr, size_t size) { return Result(Ex().memory().Allocate(size, devPtr)); }

cudaError_t cudaFree(void* devPtr) {
  Ex().SynchronizeAll();  // as CUDA's: work that may still use it finishes first
  return Result(Ex().memory().Free(devPtr));
}

cudaError_t cudaMallocHost(void** ptr, size_t size) { return Result(Ex().memory().AllocateHost(size, ptr)); }
cudaError_t cudaFreeHost(void* ptr) {
  Ex().SynchronizeAll();
  return Result(Ex().memory().FreeHost(ptr));
}
cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int) {
  return Result(Ex().memory().Register(ptr, size, octo::cuda_sim::GetConfig().pinnable_bytes));
}
cudaError_t cudaHostUnregister(void* ptr) { return Result(Ex().memory().Unregister(ptr)); }

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return Result(cudaErrorInvalidValue);
  *total = Ex().memory().capacity();
  *free = *total - Ex().memory().used();
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  return octo::cuda_sim::Copy(dst, src, count, kind, nullptr, /*asynchronous=*/false);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
  return octo::cuda_sim::Copy(dst, src, count, kind, stream, /*asynchronous=*/true);
}
cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
  return octo::cuda_sim::Set(devPtr, value, count, nullptr, /*asynchronous=*/false);
}
cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  return octo::cuda_sim::Set(devPtr, value, count, stream, /*asynchronous=*/true);
}

cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
  if (pStream == nullptr) return Result(cudaErrorInvalidValue);
  *pStream = Ex().CreateStream(/*blocking=*/true);
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  if (pStream == nullptr || (flags & ~cudaStreamNonBlocking) != 0) return Result(cudaErrorInvalidValue);
  *pStream = Ex().CreateStream(/*blocking=*/(flags & cudaStreamNonBlocking) == 0);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr || !Ex().IsStream(stream)) return Result(cudaErrorInvalidResourceHandle);
  Ex().DestroyStream(stream);
  return cudaSuccess;
}
// A capturing stream cannot be waited for, and records no events (the
// executor's graphs hold kernels, copies and fills): each such call ends the
// capture's hope (cudaStreamEndCapture then fails).
static cudaError_t RefusedInCapture(cudaStream_t stream) {
  Ex().InvalidateCapture(stream);
  return Result(cudaErrorStreamCaptureUnsupported);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!Ex().IsStream(stream)) return Result(cudaErrorInvalidResourceHandle);
  if (Ex().Capturing(stream)) return RefusedInCapture(stream);
  CUstream_st* s = Ex().Resolve(stream);
  s->WaitDone(s->last_ticket());
  return Result(Ex().sticky_error());
}
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (!Ex().IsStream(stream)) return Result(cudaErrorInvalidResourceHandle);
  if (Ex().Capturing(stream)) return RefusedInCapture(stream);
  if (Ex().sticky_error() != cudaSuccess) return Result(Ex().sticky_error());
  CUstream_st* s = Ex().Resolve(stream);
  return s->Done(s->last_ticket()) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  if (event == nullptr || !Ex().IsStream(stream)) return Result(cudaErrorInvalidResourceHandle);
  if (Ex().Capturing(stream)) return RefusedInCapture(stream);
  const uint64_t generation = event->recorded();
  if (generation == 0) return cudaSuccess;  // never recorded: nothing to wait for
  Ex().Enqueue(stream, "cudaStreamWaitEvent", [event, generation] { event->WaitDone(generation); });
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  constexpr unsigned kKnown = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (event == nullptr || (flags & ~kKnown) != 0) return Result(cudaErrorInvalidValue);
  *event = new CUevent_st(flags);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return Result(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(octo::cuda_sim::retired_mu);
  octo::cuda_sim::retired_events->emplace_back(event);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (event == nullptr || !Ex().IsStream(stream)) return Result(cudaErrorInvalidResourceHandle);
  if (Ex().Capturing(stream)) return RefusedInCapture(stream);
  const uint64_t generation = event->NewRecord();
  // Not skipped after a kernel failure, so nothing waiting on it hangs.
  Ex().Enqueue(stream, "cudaEventRecord", [event, generation] { event->Complete(generation); }, /*always=*/true);
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (event == nullptr) return Result(cudaErrorInvalidResourceHandle);
  return event->Done(event->recorded()) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event == nullptr) return Result(cudaErrorInvalidResourceHandle);
  event->WaitDone(event->recorded());
  return Result(Ex().sticky_error());
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return Result(cudaErrorInvalidValue);
  if (start == nullptr || end == nullptr) return Result(cudaErrorInvalidResourceHandle);
  if (((start->flags() | end->flags()) & cudaEventDisableTiming) != 0) return Result(cudaErrorInvalidResourceHandle);
  if (start->recorded() == 0 || end->recorded() == 0) return Result(cudaErrorInvalidResourceHandle);
  std::chrono::steady_clock::time_point t0, t1;
  if (!start->Time(&t0) || !end->Time(&t1)) return Result(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(t1 - t0).count();
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  Ex().SynchronizeAll();
  return Result(Ex().sticky_error());
}
cudaError_t cudaDeviceReset(void) {
  Ex().SynchronizeAll();
  Ex().ClearStickyError();
  octo::cuda_sim::last_error = cudaSuccess;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return Result(cudaErrorInvalidValue);
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return Result(cudaErrorInvalidValue);
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : Result(cudaErrorInvalidDevice); }

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return Result(cudaErrorInvalidValue);
  if (device != 0) return Result(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof(*prop));
  const int threads = Ex().grids().host_threads();
  std::snprintf(prop->name, sizeof(prop->name), "Octo CUDA executor (host, %d threads)", threads);
  prop->totalGlobalMem = Ex().memory().capacity();
  prop->sharedMemPerBlock = 48 * 1024;
  prop->sharedMemPerBlockOptin = octo::cuda_sim::kMaxSharedBytesPerBlock;
  prop->sharedMemPerMultiprocessor = 228 * 1024;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->multiProcessorCount = threads;
  prop->major = 9;
  prop->minor = 0;
  prop->unifiedAddressing = 1;
  prop->asyncEngineCount = 2;
  prop->concurrentKernels = 1;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void*, enum cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize &&
      (value < 0 || static_cast<size_t>(value) > octo::cuda_sim::kMaxSharedBytesPerBlock)) {
    return Result(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t sticky = Ex().sticky_error();
  const cudaError_t error = octo::cuda_sim::last_error;
  octo::cuda_sim::last_error = cudaSuccess;
  return sticky != cudaSuccess ? sticky : error;
}
cudaError_t cudaPeekAtLastError(void) {
  const cudaError_t sticky = Ex().sticky_error();
  return sticky != cudaSuccess ? sticky : octo::cuda_sim::last_error;
}

const char* cudaGetErrorName(cudaError_t error) { return octo::cuda_sim::Executor::ErrorName(error); }
const char* cudaGetErrorString(cudaError_t error) { return Ex().ErrorString(error); }

cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
  if (runtimeVersion == nullptr) return Result(cudaErrorInvalidValue);
  *runtimeVersion = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* driverVersion) {
  if (driverVersion == nullptr) return Result(cudaErrorInvalidValue);
  *driverVersion = CUDART_VERSION;
  return cudaSuccess;
}

}  // extern "C"
