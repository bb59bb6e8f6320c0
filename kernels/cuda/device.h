// The CUDA device, device memory and streams, as RAII values.
//
// Runtime API (libcudart) only: a binary that used the driver API would not
// even start on a machine without libcuda.so, and CI has no GPU driver.
// Everything here acts on the device that is current for the calling thread
// (cudaSetDevice); Octo runs on device 0 unless told otherwise.
#pragma once

#include <cstddef>
#include <string_view>

#include <cuda_runtime_api.h>

#include "kernels/ops.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace octo::cuda {

// The number of CUDA devices this process can use. 0, not an error, when
// there are none or there is no usable driver (missing, or older than this
// runtime): callers and tests branch on it instead of handling a Status.
int CudaDeviceCount();

// Whether OCTO_LAUNCH (common.cuh) launches kernels as programmatic
// dependent launches: each may be scheduled while the kernel before it on
// its stream runs, and waits in GridStart() for it. On when the current
// device is sm_90 or newer and a probe (two such launches, eager and in a
// captured graph) gives the right count, unless the environment sets
// OCTO_CUDA_PDL=0; off on older devices, when the probe fails (then on
// stderr, once) and in the executor (which runs a stream's kernels one
// after another). Decided at the first call (programmatic_launch.cu); call
// it before any stream capture.
bool ProgrammaticLaunches();

// How many bytes at the start of each weight row a dense decode MatMul asks
// L2 for before it waits for its predecessor (common.cuh: GridStartAfter,
// PrefetchL2): while the kernel before it runs (under programmatic launch),
// and in any case the row's first bytes at once rather than a lane's few
// units at a time. kDefaultWeightPrefetchBytes unless the environment sets
// OCTO_CUDA_PREFETCH to a number of bytes from 0 (off) to
// kMaxWeightPrefetchBytes (anything else: the default, and a line on
// stderr, once). 0 also turns off the norms' prefetch of their weights
// (rmsnorm.cu) and attention's of a decode step's key and value rows
// (attention.cu). The default covers a 4096-column Q4_K row (2304 bytes) and
// most of a Q6_K one; the first blocks of a launch, those that can start
// early (about 8 a SM), then ask for at most 132 * 8 * 4 rows * 4 KiB = 17
// MB of an H100's 50 MB L2.
inline constexpr int kDefaultWeightPrefetchBytes = 4096;
inline constexpr int kMaxWeightPrefetchBytes = 1 << 20;
int WeightPrefetchBytes();
// OCTO_CUDA_PREFETCH's text as bytes: INVALID_ARGUMENT, naming it and the
// range, unless it is a whole number from 0 to kMaxWeightPrefetchBytes.
absl::StatusOr<int> ParseWeightPrefetchBytes(std::string_view text);
// A measuring aid (decode_step_bench --prefetch) and a test's way to both
// settings: WeightPrefetchBytes from now on. False, and no change, outside
// 0..kMaxWeightPrefetchBytes. Not thread-safe: set it before any launch.
bool SetWeightPrefetchBytes(int bytes);

// Every device allocation Octo makes is whole units of this many bytes (the
// size asked, rounded up): a kernel may read a buffer in aligned words up to
// the unit boundary past its last byte (kernels/cuda/weight_stage.cuh).
inline constexpr size_t kAllocationUnit = 16;
inline constexpr size_t AllocationBytes(size_t bytes) {
  return (bytes + kAllocationUnit - 1) / kAllocationUnit * kAllocationUnit;
}

// Device memory from cudaMalloc, freed by the destructor. Move-only; a
// moved-from or default-constructed buffer is empty (data() == nullptr,
// size() == 0).
//
// The destructor's cudaFree waits for all work on the device first, so a
// buffer may be dropped while kernels that use it are still queued. Not
// thread-safe; one owner at a time.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;

  // `bytes` of uninitialised device memory (AllocationBytes of it allocated;
  // size() says `bytes`); 0 bytes gives an empty buffer.
  // RESOURCE_EXHAUSTED when the device is full, FAILED_PRECONDITION without a
  // device.
  static absl::StatusOr<DeviceBuffer> Allocate(size_t bytes);

  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

  // Copy `bytes` between host memory and the start of this buffer, queued on
  // `stream` and waited for before returning, so the host memory may be
  // reused (or read) at once and later work on any stream sees the data. For
  // setup and tests, not the decode loop. INVALID_ARGUMENT when bytes >
  // size() or the host pointer is null.
  absl::Status CopyFromHost(const void* src, size_t bytes, cudaStream_t stream);
  absl::Status CopyToHost(void* dst, size_t bytes, cudaStream_t stream) const;

 private:
  DeviceBuffer(void* data, size_t size) : data_(data), size_(size) {}
  void Reset();

  void* data_ = nullptr;
  size_t size_ = 0;
};

// A CUDA stream created with cudaStreamNonBlocking: it does not wait for the
// legacy default stream, so work on it can overlap copies on other streams.
// The destructor calls cudaStreamDestroy, which returns at once; work already
// queued still runs to completion. Move-only; a moved-from CudaStream holds
// nullptr, which CUDA reads as the legacy default stream.
class CudaStream {
 public:
  CudaStream() = default;  // holds nullptr, the legacy default stream
  static absl::StatusOr<CudaStream> Create();

  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  ~CudaStream();

  cudaStream_t get() const { return stream_; }

  // Blocks until everything queued on the stream has run; returns the first
  // error any of it hit.
  absl::Status Synchronize() const;

 private:
  explicit CudaStream(cudaStream_t stream) : stream_(stream) {}
  void Reset();

  cudaStream_t stream_ = nullptr;
};

// A cuBLAS handle (cublasCreate), destroyed with the object. Move-only.
class BlasContext {
 public:
  BlasContext() = default;  // holds no handle
  // INTERNAL (naming cuBLAS's status) when cuBLAS cannot start.
  static absl::StatusOr<BlasContext> Create();

  BlasContext(BlasContext&& other) noexcept;
  BlasContext& operator=(BlasContext&& other) noexcept;
  BlasContext(const BlasContext&) = delete;
  BlasContext& operator=(const BlasContext&) = delete;
  ~BlasContext();

  BlasHandle get() const { return handle_; }

 private:
  explicit BlasContext(BlasHandle handle) : handle_(handle) {}
  void Reset();

  BlasHandle handle_ = nullptr;
};

}  // namespace octo::cuda
