// The counters of api_counts.h and the --wrap'ed CUDA calls that feed them.
// Each __wrap_X counts and calls __real_X, the runtime's X (libcudart on a
// GPU, the executor's in an OCTO_CUDA_SIM build). kernels/CMakeLists.txt's
// OCTO_CUDA_COUNTED_CALLS names exactly the functions defined here.
#include "kernels/cuda/api_counts.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace octo::cuda {
namespace {

struct Counters {
  std::atomic<uint64_t> launches{0}, host_calls{0}, blocking_waits{0}, pageable_copies{0}, pageable_bytes{0},
      allocations{0}, frees{0}, h2d_bytes{0}, d2h_bytes{0}, graph_launches{0}, graph_captures{0};
};

Counters& Count() {
  static Counters* counters = new Counters();  // never destroyed: calls may come during exit
  return *counters;
}

void Add(std::atomic<uint64_t>& counter, uint64_t n = 1) { counter.fetch_add(n, std::memory_order_relaxed); }

// Host memory the runtime knows as pinned (cudaMallocHost) or registered
// (cudaHostRegister): start -> size. A copy from or to anything else is
// pageable.
class PinnedRanges {
 public:
  void Add(const void* start, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    ranges_[reinterpret_cast<uintptr_t>(start)] = size;
  }
  void Remove(const void* start) {
    std::lock_guard<std::mutex> lock(mu_);
    ranges_.erase(reinterpret_cast<uintptr_t>(start));
  }
  bool Contains(const void* pointer, size_t bytes) const {
    const uintptr_t p = reinterpret_cast<uintptr_t>(pointer);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ranges_.upper_bound(p);
    if (it == ranges_.begin()) return false;
    --it;
    return p - it->first + bytes <= it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<uintptr_t, size_t> ranges_;
};

PinnedRanges& Pinned() {
  static PinnedRanges* ranges = new PinnedRanges();
  return *ranges;
}

// The bytes and pageability of a copy of `kind` between `dst` and `src`.
void CountCopy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  Counters& c = Count();
  const void* host = nullptr;
  if (kind == cudaMemcpyHostToDevice) {
    Add(c.h2d_bytes, bytes);
    host = src;
  } else if (kind == cudaMemcpyDeviceToHost) {
    Add(c.d2h_bytes, bytes);
    host = dst;
  }
  if (host != nullptr && bytes > 0 && !Pinned().Contains(host, bytes)) {
    Add(c.pageable_copies);
    Add(c.pageable_bytes, bytes);
  }
}

void Call() { Add(Count().host_calls); }
void Wait() {
  Call();
  Add(Count().blocking_waits);
}

}  // namespace

ApiCounts ApiCounts::operator-(const ApiCounts& e) const {
  return ApiCounts{launches - e.launches,
                   host_calls - e.host_calls,
                   blocking_waits - e.blocking_waits,
                   pageable_copies - e.pageable_copies,
                   pageable_bytes - e.pageable_bytes,
                   allocations - e.allocations,
                   frees - e.frees,
                   h2d_bytes - e.h2d_bytes,
                   d2h_bytes - e.d2h_bytes,
                   graph_launches - e.graph_launches,
                   graph_captures - e.graph_captures};
}

ApiCounts CurrentApiCounts() {
  const Counters& c = Count();
  ApiCounts n;
  n.launches = c.launches.load(std::memory_order_relaxed);
  n.host_calls = c.host_calls.load(std::memory_order_relaxed);
  n.blocking_waits = c.blocking_waits.load(std::memory_order_relaxed);
  n.pageable_copies = c.pageable_copies.load(std::memory_order_relaxed);
  n.pageable_bytes = c.pageable_bytes.load(std::memory_order_relaxed);
  n.allocations = c.allocations.load(std::memory_order_relaxed);
  n.frees = c.frees.load(std::memory_order_relaxed);
  n.h2d_bytes = c.h2d_bytes.load(std::memory_order_relaxed);
  n.d2h_bytes = c.d2h_bytes.load(std::memory_order_relaxed);
  n.graph_launches = c.graph_launches.load(std::memory_order_relaxed);
  n.graph_captures = c.graph_captures.load(std::memory_order_relaxed);
  return n;
}

void CountLaunch() {
  Add(Count().launches);
  Call();
}

}  // namespace octo::cuda

using octo::cuda::Add;
using octo::cuda::Call;
using octo::cuda::Wait;

// The real functions (the linker's names for the wrapped ones).
extern "C" {
cudaError_t __real_cudaMalloc(void** ptr, size_t size);
cudaError_t __real_cudaFree(void* ptr);
cudaError_t __real_cudaMallocHost(void** ptr, size_t size);
cudaError_t __real_cudaFreeHost(void* ptr);
cudaError_t __real_cudaHostRegister(void* ptr, size_t size, unsigned int flags);
cudaError_t __real_cudaHostUnregister(void* ptr);
cudaError_t __real_cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind);
cudaError_t __real_cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                   cudaStream_t stream);
cudaError_t __real_cudaMemset(void* ptr, int value, size_t count);
cudaError_t __real_cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream);
cudaError_t __real_cudaStreamCreate(cudaStream_t* stream);
cudaError_t __real_cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags);
cudaError_t __real_cudaStreamDestroy(cudaStream_t stream);
cudaError_t __real_cudaStreamSynchronize(cudaStream_t stream);
cudaError_t __real_cudaStreamQuery(cudaStream_t stream);
cudaError_t __real_cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags);
cudaError_t __real_cudaEventCreate(cudaEvent_t* event);
cudaError_t __real_cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t __real_cudaEventDestroy(cudaEvent_t event);
cudaError_t __real_cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t __real_cudaEventQuery(cudaEvent_t event);
cudaError_t __real_cudaEventSynchronize(cudaEvent_t event);
cudaError_t __real_cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t __real_cudaDeviceSynchronize(void);
cudaError_t __real_cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t __real_cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t __real_cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags);
cudaError_t __real_cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t __real_cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t __real_cudaGraphDestroy(cudaGraph_t graph);
cudaError_t __real_cudaGetLastError(void);
cudaError_t __real_cudaPeekAtLastError(void);
cudaError_t __real_cudaMemGetInfo(size_t* free, size_t* total);
cudaError_t __real_cudaGetDeviceCount(int* count);
cudaError_t __real_cudaGetDevice(int* device);
cudaError_t __real_cudaSetDevice(int device);
cudaError_t __real_cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t __real_cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value);
cublasStatus_t __real_cublasCreate_v2(cublasHandle_t* handle);
cublasStatus_t __real_cublasDestroy_v2(cublasHandle_t handle);
cublasStatus_t __real_cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t __real_cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t __real_cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                   int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda,
                                   const void* B, cudaDataType Btype, int ldb, const void* beta, void* C,
                                   cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                   cublasGemmAlgo_t algo);

// Memory.
cudaError_t __wrap_cudaMalloc(void** ptr, size_t size) {
  Call();
  Add(octo::cuda::Count().allocations);
  return __real_cudaMalloc(ptr, size);
}
cudaError_t __wrap_cudaFree(void* ptr) {
  Call();
  Add(octo::cuda::Count().frees);
  return __real_cudaFree(ptr);
}
cudaError_t __wrap_cudaMallocHost(void** ptr, size_t size) {
  Call();
  Add(octo::cuda::Count().allocations);
  const cudaError_t error = __real_cudaMallocHost(ptr, size);
  if (error == cudaSuccess) octo::cuda::Pinned().Add(*ptr, size);
  return error;
}
cudaError_t __wrap_cudaFreeHost(void* ptr) {
  Call();
  Add(octo::cuda::Count().frees);
  octo::cuda::Pinned().Remove(ptr);
  return __real_cudaFreeHost(ptr);
}
cudaError_t __wrap_cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  Call();
  Add(octo::cuda::Count().allocations);
  const cudaError_t error = __real_cudaHostRegister(ptr, size, flags);
  if (error == cudaSuccess) octo::cuda::Pinned().Add(ptr, size);
  return error;
}
cudaError_t __wrap_cudaHostUnregister(void* ptr) {
  Call();
  Add(octo::cuda::Count().frees);
  octo::cuda::Pinned().Remove(ptr);
  return __real_cudaHostUnregister(ptr);
}
cudaError_t __wrap_cudaMemGetInfo(size_t* free, size_t* total) {
  Call();
  return __real_cudaMemGetInfo(free, total);
}

// Copies and fills.
cudaError_t __wrap_cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  Wait();
  octo::cuda::CountCopy(dst, src, count, kind);
  return __real_cudaMemcpy(dst, src, count, kind);
}
cudaError_t __wrap_cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                   cudaStream_t stream) {
  Call();
  octo::cuda::CountCopy(dst, src, count, kind);
  return __real_cudaMemcpyAsync(dst, src, count, kind, stream);
}
cudaError_t __wrap_cudaMemset(void* ptr, int value, size_t count) {
  Wait();
  return __real_cudaMemset(ptr, value, count);
}
cudaError_t __wrap_cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
  Call();
  return __real_cudaMemsetAsync(ptr, value, count, stream);
}

// Streams and events.
cudaError_t __wrap_cudaStreamCreate(cudaStream_t* stream) {
  Call();
  return __real_cudaStreamCreate(stream);
}
cudaError_t __wrap_cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  Call();
  return __real_cudaStreamCreateWithFlags(stream, flags);
}
cudaError_t __wrap_cudaStreamDestroy(cudaStream_t stream) {
  Call();
  return __real_cudaStreamDestroy(stream);
}
cudaError_t __wrap_cudaStreamSynchronize(cudaStream_t stream) {
  Wait();
  return __real_cudaStreamSynchronize(stream);
}
cudaError_t __wrap_cudaStreamQuery(cudaStream_t stream) {
  Call();
  return __real_cudaStreamQuery(stream);
}
cudaError_t __wrap_cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  Call();
  return __real_cudaStreamWaitEvent(stream, event, flags);
}
cudaError_t __wrap_cudaEventCreate(cudaEvent_t* event) {
  Call();
  return __real_cudaEventCreate(event);
}
cudaError_t __wrap_cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  Call();
  return __real_cudaEventCreateWithFlags(event, flags);
}
cudaError_t __wrap_cudaEventDestroy(cudaEvent_t event) {
  Call();
  return __real_cudaEventDestroy(event);
}
cudaError_t __wrap_cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  Call();
  return __real_cudaEventRecord(event, stream);
}
cudaError_t __wrap_cudaEventQuery(cudaEvent_t event) {
  Call();
  return __real_cudaEventQuery(event);
}
cudaError_t __wrap_cudaEventSynchronize(cudaEvent_t event) {
  Wait();
  return __real_cudaEventSynchronize(event);
}
cudaError_t __wrap_cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  Call();
  return __real_cudaEventElapsedTime(ms, start, end);
}
cudaError_t __wrap_cudaDeviceSynchronize(void) {
  Wait();
  return __real_cudaDeviceSynchronize();
}

// Graphs: a capture counts once (at its begin), a replay once.
cudaError_t __wrap_cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  Call();
  Add(octo::cuda::Count().graph_captures);
  return __real_cudaStreamBeginCapture(stream, mode);
}
cudaError_t __wrap_cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  Call();
  return __real_cudaStreamEndCapture(stream, graph);
}
cudaError_t __wrap_cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  Call();
  return __real_cudaGraphInstantiate(exec, graph, flags);
}
cudaError_t __wrap_cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  Call();
  Add(octo::cuda::Count().graph_launches);
  return __real_cudaGraphLaunch(exec, stream);
}
cudaError_t __wrap_cudaGraphExecDestroy(cudaGraphExec_t exec) {
  Call();
  return __real_cudaGraphExecDestroy(exec);
}
cudaError_t __wrap_cudaGraphDestroy(cudaGraph_t graph) {
  Call();
  return __real_cudaGraphDestroy(graph);
}

// Errors and the device.
cudaError_t __wrap_cudaGetLastError(void) {
  Call();
  return __real_cudaGetLastError();
}
cudaError_t __wrap_cudaPeekAtLastError(void) {
  Call();
  return __real_cudaPeekAtLastError();
}
cudaError_t __wrap_cudaGetDeviceCount(int* count) {
  Call();
  return __real_cudaGetDeviceCount(count);
}
cudaError_t __wrap_cudaGetDevice(int* device) {
  Call();
  return __real_cudaGetDevice(device);
}
cudaError_t __wrap_cudaSetDevice(int device) {
  Call();
  return __real_cudaSetDevice(device);
}
cudaError_t __wrap_cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  Call();
  return __real_cudaGetDeviceProperties(prop, device);
}
cudaError_t __wrap_cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  Call();
  return __real_cudaFuncSetAttribute(func, attr, value);
}

// cuBLAS.
cublasStatus_t __wrap_cublasCreate_v2(cublasHandle_t* handle) {
  Call();
  return __real_cublasCreate_v2(handle);
}
cublasStatus_t __wrap_cublasDestroy_v2(cublasHandle_t handle) {
  Call();
  return __real_cublasDestroy_v2(handle);
}
cublasStatus_t __wrap_cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  Call();
  return __real_cublasSetStream_v2(handle, stream);
}
cublasStatus_t __wrap_cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  Call();
  return __real_cublasSetMathMode(handle, mode);
}
cublasStatus_t __wrap_cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                   int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda,
                                   const void* B, cudaDataType Btype, int ldb, const void* beta, void* C,
                                   cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                   cublasGemmAlgo_t algo) {
  // A GEMM is a kernel launch (cuBLAS's own), as well as a host call.
  octo::cuda::CountLaunch();
  return __real_cublasGemmEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype,
                             ldc, computeType, algo);
}
}  // extern "C"
